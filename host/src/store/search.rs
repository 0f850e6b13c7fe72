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

/// The ids of the conversations that have every word in their subject, or in one of their messages, with
/// `$n` the match value of [`words_only`] and `$p` the partner: for a partner's search, each found through
/// the index first (a partner has too many conversations to look into each).
pub fn partner_conversations_with_words(backend: Backend, n: usize, p: usize) -> String {
    match backend {
        Backend::Sqlite => format!(
            "SELECT rowid FROM conversations_search WHERE conversations_search MATCH ${n} \
             UNION SELECT m.conversation_id FROM messages m WHERE m.id IN \
             (SELECT rowid FROM messages_search WHERE messages_search MATCH ${n}) \
             AND m.partner_id = ${p} AND m.conversation_id IS NOT NULL"
        ),
        Backend::Postgres => format!(
            "SELECT id FROM conversations WHERE search @@ to_tsquery('simple', ${n}) \
             UNION SELECT conversation_id FROM messages WHERE search @@ to_tsquery('simple', ${n}) \
             AND partner_id = ${p} AND conversation_id IS NOT NULL"
        ),
    }
}

/// The match value for `words` in anyone's text (the caller narrows it down, as a partner's search does by
/// its conversations).
pub fn words_only(backend: Backend, words: &[String]) -> String {
    match backend {
        Backend::Sqlite => words.iter().map(|w| format!("words : \"{w}\"*")).collect::<Vec<_>>().join(" AND "),
        Backend::Postgres => words.iter().map(|w| format!("'{w}':*")).collect::<Vec<_>>().join(" & "),
    }
}

/// The match value for `words` (as `validate::search_words` gives them: letters and digits only) in what
/// `phone` owns: an FTS5 query naming the phone's column, or a tsquery.
pub fn matching(backend: Backend, phone: &str, words: &[String]) -> String {
    match backend {
        Backend::Sqlite => {
            let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
            format!("phone : \"{digits}\" AND {}", words_only(backend, words))
        }
        Backend::Postgres => words_only(backend, words),
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
