//! A partner's labels: names its agents put on conversations (by hand or by a macro) and filter the list by.
//! What a label's name and colour may be is decided here, once for keeping one and for every list filter.

use crate::clock::Millis;
pub use crate::store::labels::{Label, list};
use crate::store::{Db, labels as store};
use crate::validate::{Invalid, KeepError, label_name};

/// The colour of a label given none.
pub const GREY: &str = "#6b7280";

/// Keeps a label named `name` (trimmed, kept lower case) of `color` (`#rrggbb`, kept lower case; grey when
/// absent): refused when either is not one, or the partner has a label of that name.
pub async fn create(
    db: &Db,
    partner_id: i64,
    name: Option<&str>,
    color: Option<&str>,
    now: Millis,
) -> Result<Label, KeepError> {
    let name = label_name(name.unwrap_or("")).map_err(|why| Invalid::new("name", why))?;
    let color = match color {
        None => GREY.to_string(),
        Some(c) if c.len() == 7 && c.starts_with('#') && c[1..].bytes().all(|b| b.is_ascii_hexdigit()) => {
            c.to_ascii_lowercase()
        }
        Some(_) => return Err(Invalid::new("color", "color is #rrggbb, e.g. #2563eb").into()),
    };
    store::create(db, partner_id, &name, &color, now)
        .await?
        .ok_or_else(|| KeepError::Taken(format!("there is a label named {name:?} already")))
}

/// Deletes the partner's label `id`; the conversations that carry it lose it.
pub async fn delete(db: &Db, partner_id: i64, id: i64) -> Result<(), KeepError> {
    if !store::delete(db, partner_id, id).await? {
        return Err(KeepError::NotFound("label"));
    }
    Ok(())
}

/// The label a list is filtered by (`?label=`, a name as [`label_name`] takes it): its id, or 0 (no
/// label's) when the partner has none of that name, so the list is empty.
pub async fn filter(db: &Db, partner_id: i64, raw: &str) -> Result<i64, KeepError> {
    let name = label_name(raw).map_err(|why| Invalid::new("label", why))?;
    Ok(store::by_names(db, partner_id, std::slice::from_ref(&name)).await?.remove(&name).unwrap_or(0))
}
