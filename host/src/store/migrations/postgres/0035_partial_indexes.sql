-- Indexes that grow only where reads need them (docs/performance.md, "The send path as the database grows"):
-- a message outside a broadcast, a conversation or a developer's sends took an entry in each of these three
-- all the same (a NULL first, then its phone: a place at random in `messages_broadcast_phone` for every hub
-- send, the pages of which a large database no longer holds in cache). Only the rows that have one are kept.
DROP INDEX messages_broadcast_phone;
CREATE UNIQUE INDEX messages_broadcast_phone ON messages (broadcast_id, phone) WHERE broadcast_id IS NOT NULL;
DROP INDEX messages_conversation;
CREATE INDEX messages_conversation ON messages (conversation_id, id) WHERE conversation_id IS NOT NULL;
DROP INDEX messages_developer;
CREATE INDEX messages_developer ON messages (developer_id, created_at) WHERE developer_id IS NOT NULL;
