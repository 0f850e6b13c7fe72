//! Menus: button menus (a vertical choice list) and list menus (titled sections).

/// A menu step. A pick comes back as [`UserEvent::Select`](crate::UserEvent::Select) with the item id.
///
/// ```no_run
/// # use hubbub_guest_sdk::Menu;
/// let menu = Menu::buttons("What would you like?").item("coffee", "Coffee").item("tea", "Tea");
/// ```
pub use crate::wit::hubbub::bot::menus::Menu;
/// One choice in a menu.
///
/// ```no_run
/// # use hubbub_guest_sdk::MenuItem;
/// let item = MenuItem::new("large", "Large").description("400 ml");
/// ```
pub use crate::wit::hubbub::bot::menus::MenuItem;
/// A group of items in a menu, with an optional title.
///
/// ```no_run
/// # use hubbub_guest_sdk::MenuSection;
/// let sizes = MenuSection::titled("Size").item("small", "Small").item("large", "Large");
/// ```
pub use crate::wit::hubbub::bot::menus::MenuSection;
/// How a [`Menu`] is presented.
///
/// ```no_run
/// # use hubbub_guest_sdk::{Menu, MenuStyle};
/// assert_eq!(Menu::list("Pick one").style, MenuStyle::List);
/// ```
pub use crate::wit::hubbub::bot::menus::MenuStyle;

impl Menu {
    /// A button menu: a vertical choice list. Add items with [`item`](Menu::item).
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Menu;
    /// let menu = Menu::buttons("How can I help?").item("help", "Help").item("hours", "Opening hours");
    /// ```
    pub fn buttons(text: impl Into<String>) -> Self {
        Self::new(text, MenuStyle::Button)
    }

    /// A list menu: titled sections. Add them with [`section`](Menu::section).
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Menu, MenuSection};
    /// let menu = Menu::list("Size and extras")
    ///     .section(MenuSection::titled("Size").item("small", "Small").item("large", "Large"))
    ///     .section(MenuSection::titled("Extras").item("milk", "Milk").item("none", "Nothing"));
    /// ```
    pub fn list(text: impl Into<String>) -> Self {
        Self::new(text, MenuStyle::List)
    }

    fn new(text: impl Into<String>, style: MenuStyle) -> Self {
        Menu { text: text.into(), style, sections: Vec::new() }
    }

    /// Appends an item to the last section, starting an untitled one if there is none.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::Menu;
    /// let menu = Menu::buttons("Drink?").item("coffee", "Coffee").item("tea", "Tea");
    /// assert_eq!(menu.sections.len(), 1);
    /// ```
    pub fn item(self, id: impl Into<String>, label: impl Into<String>) -> Self {
        self.push(MenuItem::new(id, label))
    }

    /// Appends a prepared item (e.g. one with a description) to the last section, starting an untitled
    /// one if there is none.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Menu, MenuItem};
    /// let menu = Menu::buttons("Drink?").push(MenuItem::new("coffee", "Coffee").description("Espresso"));
    /// ```
    pub fn push(mut self, item: MenuItem) -> Self {
        match self.sections.last_mut() {
            Some(section) => section.items.push(item),
            None => self.sections.push(MenuSection::untitled().push(item)),
        }
        self
    }

    /// Appends a section.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{Menu, MenuSection};
    /// let menu = Menu::list("Extras").section(MenuSection::titled("Extras").item("milk", "Milk"));
    /// ```
    pub fn section(mut self, section: MenuSection) -> Self {
        self.sections.push(section);
        self
    }
}

impl MenuSection {
    /// A section with a heading.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::MenuSection;
    /// let extras = MenuSection::titled("Extras").item("milk", "Milk");
    /// ```
    pub fn titled(title: impl Into<String>) -> Self {
        MenuSection { title: Some(title.into()), items: Vec::new() }
    }

    /// A section without a heading.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::MenuSection;
    /// let section = MenuSection::untitled().item("yes", "Yes").item("no", "No");
    /// ```
    pub fn untitled() -> Self {
        MenuSection { title: None, items: Vec::new() }
    }

    /// Appends an item.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::MenuSection;
    /// let sizes = MenuSection::titled("Size").item("small", "Small");
    /// ```
    pub fn item(self, id: impl Into<String>, label: impl Into<String>) -> Self {
        self.push(MenuItem::new(id, label))
    }

    /// Appends a prepared item.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::{MenuItem, MenuSection};
    /// let sizes = MenuSection::titled("Size").push(MenuItem::new("large", "Large").description("400 ml"));
    /// ```
    pub fn push(mut self, item: MenuItem) -> Self {
        self.items.push(item);
        self
    }
}

impl MenuItem {
    /// An item without a description.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::MenuItem;
    /// let item = MenuItem::new("tea", "Tea");
    /// ```
    pub fn new(id: impl Into<String>, label: impl Into<String>) -> Self {
        MenuItem { id: id.into(), label: label.into(), description: None }
    }

    /// Sets the secondary text shown under the label.
    ///
    /// ```no_run
    /// # use hubbub_guest_sdk::MenuItem;
    /// let item = MenuItem::new("agent", "Talk to a person").description("Mon–Fri, 9–17");
    /// ```
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}
