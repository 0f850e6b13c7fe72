-- Names people see (issue 74, point 7): an agent's reply in a conversation keeps the member who wrote it and
-- their display name as it was when they wrote (the person sees its first word; the partner the whole name).
-- No foreign key: a member removed later leaves their replies signed as they were.
ALTER TABLE messages ADD COLUMN author_id BIGINT;
ALTER TABLE messages ADD COLUMN author_name TEXT;
