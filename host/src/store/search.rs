//! Text search over what a user reads, served by each engine's own text index: on SQLite the FTS5 tables
//! `messages_search` (one row per message, rowid = its id, with the owner's phone and the words; migration
//! 0016) and `conversation_words` (one row per conversation with its partner, phone, subject and the words
//! of all its messages; migration 0025), filled by triggers; on PostgreSQL the tables `message_words`
//! (migration 0028) and `conversation_words` of tsvectors, filled by a trigger as a message is written, with
//! GIN indexes. Both use the language-neutral tokenizer (no stemming), and every word searched must start a
//! word of the text. Encrypted messages have no words: the server cannot read them.

use super::Backend;

/// The condition "the message `m` has every word" for `backend`, with `$n` the match value.
pub fn message_has_words(backend: Backend, n: usize) -> String {
    match backend {
        Backend::Sqlite => format!("m.id IN (SELECT rowid FROM messages_search WHERE messages_search MATCH ${n})"),
        Backend::Postgres => {
            format!("m.id IN (SELECT message_id FROM message_words WHERE words @@ to_tsquery('simple', ${n}))")
        }
    }
}

/// The condition "the conversation `c` has every word, each in its subject or in one of its messages", with
/// `$n` the match value of [`matching`] (a user's own conversations: few, each looked up by its id).
pub fn conversation_has_words(backend: Backend, n: usize) -> String {
    match backend {
        Backend::Sqlite => {
            format!("c.id IN (SELECT rowid FROM conversation_words WHERE conversation_words MATCH ${n})")
        }
        Backend::Postgres => format!(
            "EXISTS (SELECT 1 FROM conversation_words w WHERE w.conversation_id = c.id \
             AND w.words @@ to_tsquery('simple', ${n}))"
        ),
    }
}

/// How many of a partner's newest conversations (as filtered) PostgreSQL looks into one by one before it asks
/// the text index (see [`partner_conversations_with_words`]).
pub const NEWEST_LOOKED_INTO: i64 = 1_000;

/// The queries that find a partner's conversations with every word (each in the subject or in one of the
/// messages), newest first, to run in order until one fills the page (the last one's answer is the answer):
/// `columns` the conversation's columns, `filters` the list's conditions on conversations `c`, `$n` the match
/// value of [`partner_matching`], `$1` the partner, `$l` the page's size and `before` the placeholder of the
/// page's cursor.
///
/// - SQLite: one query, through the FTS5 index, which gives the conversations newest first (its rowid is the
///   conversation's id) and stops at a page. The CROSS JOIN keeps the planner from starting with the
///   conversations, which would look into each.
/// - PostgreSQL: a GIN index finds every matching conversation before they are ordered — for a word in most
///   conversations, tens of thousands. So the newest [`NEWEST_LOOKED_INTO`] conversations are looked into
///   first, one by one, which is enough for such a word; a rarer one then goes through the index, where it
///   has few matches.
pub fn partner_conversations_with_words(
    backend: Backend,
    columns: &str,
    filters: &str,
    n: usize,
    l: usize,
    before: Option<usize>,
) -> Vec<String> {
    match backend {
        Backend::Sqlite => {
            let below = before.map(|b| format!(" AND w.rowid < ${b}")).unwrap_or_default();
            vec![format!(
                "{columns}FROM conversation_words w CROSS JOIN conversations c ON c.id = w.rowid \
                 JOIN partners p ON p.id = c.partner_id WHERE conversation_words MATCH ${n}{below} AND {filters} \
                 ORDER BY w.rowid DESC LIMIT ${l}"
            )]
        }
        Backend::Postgres => vec![
            format!(
                "{columns}FROM (SELECT * FROM conversations c WHERE {filters} ORDER BY c.id DESC \
                 LIMIT {NEWEST_LOOKED_INTO}) c JOIN partners p ON p.id = c.partner_id \
                 WHERE (SELECT w.words FROM conversation_words w WHERE w.conversation_id = c.id) \
                 @@ to_tsquery('simple', ${n}) ORDER BY c.id DESC LIMIT ${l}"
            ),
            format!(
                "{columns}FROM conversations c JOIN partners p ON p.id = c.partner_id \
                 WHERE c.id IN (SELECT conversation_id FROM conversation_words WHERE partner_id = $1 \
                 AND words @@ to_tsquery('simple', ${n})) AND {filters} ORDER BY c.id DESC LIMIT ${l}"
            ),
        ],
    }
}

/// The match value for `words` in a partner's conversations: an FTS5 query naming the partner's column, or a
/// tsquery (the partner is a condition of its own there).
pub fn partner_matching(backend: Backend, partner_id: i64, words: &[String]) -> String {
    match backend {
        Backend::Sqlite => format!("partner : \"{partner_id}\" AND {}", words_only(backend, words)),
        Backend::Postgres => words_only(backend, words),
    }
}

/// The match value for `words` in anyone's text (the caller narrows it down).
fn words_only(backend: Backend, words: &[String]) -> String {
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
        assert_eq!(
            partner_matching(Backend::Sqlite, 7, &words),
            r#"partner : "7" AND words : "late"* AND words : "zoë"*"#
        );
        assert_eq!(partner_matching(Backend::Postgres, 7, &words), "'late':* & 'zoë':*");
    }
}
