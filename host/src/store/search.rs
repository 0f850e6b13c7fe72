//! Text search over what a user reads, served by each engine's own text index: on SQLite the FTS5 tables
//! `messages_search` and `conversations_search` (one row per message or conversation, rowid = its id, with
//! the owner's phone and the words; filled by triggers), on PostgreSQL the `search` tsvector columns with
//! GIN indexes (migration 0016). Both use the language-neutral tokenizer (no stemming), and every word
//! searched must start a word of the text. Encrypted messages have no words: the server cannot read them.

use super::Backend;

/// The condition "the message `m` has every word" for `backend`, with `$n` the match value.
pub fn message_has_words(backend: Backend, n: usize) -> String {
    match backend {
        Backend::Sqlite => format!("m.id IN (SELECT rowid FROM messages_search WHERE messages_search MATCH ${n})"),
        Backend::Postgres => format!("m.search @@ to_tsquery('simple', ${n})"),
    }
}

/// The condition "the conversation `c` has every word in its subject, or one of its messages has", with `$n`
/// the match value.
pub fn conversation_has_words(backend: Backend, n: usize) -> String {
    match backend {
        Backend::Sqlite => format!(
            "(c.id IN (SELECT rowid FROM conversations_search WHERE conversations_search MATCH ${n}) \
             OR c.id IN (SELECT m.conversation_id FROM messages m WHERE {}))",
            message_has_words(backend, n)
        ),
        Backend::Postgres => format!(
            "(c.search @@ to_tsquery('simple', ${n}) OR EXISTS (SELECT 1 FROM messages m \
             WHERE m.conversation_id = c.id AND {}))",
            message_has_words(backend, n)
        ),
    }
}

/// The match value for `words` (as `validate::search_words` gives them: letters and digits only) in what
/// `phone` owns: an FTS5 query naming the phone's column, or a tsquery.
pub fn matching(backend: Backend, phone: &str, words: &[String]) -> String {
    match backend {
        Backend::Sqlite => {
            let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
            let mut query = format!("phone : \"{digits}\"");
            for word in words {
                query.push_str(&format!(" AND words : \"{word}\"*"));
            }
            query
        }
        Backend::Postgres => words.iter().map(|w| format!("'{w}':*")).collect::<Vec<_>>().join(" & "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_gets_every_word_as_a_prefix() {
        let words = ["late".to_string(), "zoë".to_string()];
        assert_eq!(
            matching(Backend::Sqlite, "+15551230000", &words),
            r#"phone : "15551230000" AND words : "late"* AND words : "zoë"*"#
        );
        assert_eq!(matching(Backend::Postgres, "+15551230000", &words), "'late':* & 'zoë':*");
    }
}
