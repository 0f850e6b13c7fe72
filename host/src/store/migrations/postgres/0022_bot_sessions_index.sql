-- A partner's flow and chat sessions per bot, newest first (the console's Bots page, GET /flow-sessions?bot=).
CREATE INDEX flow_sessions_bot ON flow_sessions (bot_id, id);
