-- A message's words in a table of their own, written once as the message is written (store/search.rs).
-- On PostgreSQL they move out of a generated column of `messages` that every update of the row computed
-- again. SQLite's FTS5 rows (migration 0016) were already written once, by a trigger: nothing changes here.
-- engine-specific: nothing to do (PostgreSQL: a table of tsvectors kept by a trigger).
SELECT 1;
