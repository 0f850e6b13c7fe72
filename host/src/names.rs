//! Closed sets of names that are stored and sent as strings (states, statuses, modes): declared once with
//! [`string_enum!`], each gets one string form per variant, used alike by the database, the API, the events
//! and the OpenAPI document.

/// Declares a `Copy` enum whose variants each have one string form: `as_str` (a `const fn`, so SQL text can
/// be built from it at compile time), `parse`, `ALL`, `names`, `Display`, `FromStr` (its error names the
/// enum, the text and the names expected: the store's decode errors, the API's query filters), serde with the same strings, and the OpenAPI schema
/// (`ToSchema`) listing them.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $( $(#[$variant_meta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The variant with this string form, if any (exact, case-sensitive).
            pub fn parse(text: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.as_str() == text)
            }

            /// Every string form, in declaration order (for messages and the OpenAPI document's enums).
            pub fn names() -> Vec<&'static str> {
                $name::ALL.iter().map(|v| v.as_str()).collect()
            }
        }

        /// In the OpenAPI document: a string with exactly these values.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> std::result::Result<$name, String> {
                $name::parse(text).ok_or_else(|| {
                    format!("unknown {} {text:?}: expected one of {}", stringify!($name), $name::names().join(", "))
                })
            }
        }
    };
}

pub(crate) use string_enum;

#[cfg(test)]
mod tests {
    use crate::bots::RuntimeMode;
    use crate::conversations::ConversationState;
    use crate::events::DeliveryState;
    use crate::flows::{SessionKind, SessionState};
    use crate::messages::{
        AttemptKind, AttemptState, Channel, ContentType, Direction, E2eMode, Encryption, MessageState,
    };
    use crate::store::accounts::AccountState;
    use crate::template::{Category, TemplateStatus};

    fn one_string_form<T>(all: &[T], as_str: fn(T) -> &'static str, parse: fn(&str) -> Option<T>)
    where
        T: Copy + PartialEq + std::fmt::Debug + std::fmt::Display + serde::Serialize + serde::de::DeserializeOwned,
    {
        for &v in all {
            let text = as_str(v);
            assert_eq!(serde_json::to_value(v).unwrap(), text);
            assert_eq!(serde_json::from_value::<T>(text.into()).unwrap(), v);
            assert_eq!(parse(text), Some(v));
            assert_eq!(v.to_string(), text);
            assert_eq!(parse(&text.to_uppercase()), None, "{text}: parsing is exact");
        }
        assert_eq!(parse(""), None);
    }

    #[test]
    fn every_declared_name_has_one_string_form() {
        one_string_form(MessageState::ALL, MessageState::as_str, MessageState::parse);
        one_string_form(Direction::ALL, Direction::as_str, Direction::parse);
        one_string_form(ConversationState::ALL, ConversationState::as_str, ConversationState::parse);
        one_string_form(TemplateStatus::ALL, TemplateStatus::as_str, TemplateStatus::parse);
        one_string_form(RuntimeMode::ALL, RuntimeMode::as_str, RuntimeMode::parse);
        one_string_form(Channel::ALL, Channel::as_str, Channel::parse);
        one_string_form(AttemptKind::ALL, AttemptKind::as_str, AttemptKind::parse);
        one_string_form(AttemptState::ALL, AttemptState::as_str, AttemptState::parse);
        one_string_form(ContentType::ALL, ContentType::as_str, ContentType::parse);
        one_string_form(Encryption::ALL, Encryption::as_str, Encryption::parse);
        one_string_form(E2eMode::ALL, E2eMode::as_str, E2eMode::parse);
        one_string_form(Category::ALL, Category::as_str, Category::parse);
        one_string_form(AccountState::ALL, AccountState::as_str, AccountState::parse);
        one_string_form(DeliveryState::ALL, DeliveryState::as_str, DeliveryState::parse);
        one_string_form(SessionState::ALL, SessionState::as_str, SessionState::parse);
        one_string_form(SessionKind::ALL, SessionKind::as_str, SessionKind::parse);
        assert_eq!(Channel::names(), ["inapp", "whatsapp", "sms"]);
        assert_eq!(E2eMode::Conversation.as_str(), crate::e2e::MODE_CONVERSATION);
        assert_eq!(MessageState::names(), ["queued", "sent", "delivered", "read", "failed"]);
        assert_eq!(
            "sending".parse::<MessageState>(),
            Err("unknown MessageState \"sending\": expected one of queued, sent, delivered, read, failed".to_string())
        );
    }
}
