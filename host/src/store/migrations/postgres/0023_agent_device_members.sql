-- The member whose console (browser) published an agent device: it is unpublished when the member is removed,
-- so no content key made afterwards is wrapped to a browser of someone who left (none for keys the partner's
-- own systems published with the API key).
ALTER TABLE agent_devices ADD COLUMN member_id BIGINT;
CREATE INDEX agent_devices_member ON agent_devices (member_id);
