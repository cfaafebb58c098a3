-- Suspect articles (a gone answer not confirmed yet) whose removal evidence is due: the budget run
-- asks for them every minute of a slot (dgb.integrity.tiers.DUE_SUSPECTS_SQL). Without this index the
-- query walks integrity_state_due_idx over every due article to find the few with a gone streak; at
-- production scale most of the 300k rows are due at some point of the day.
CREATE INDEX IF NOT EXISTS integrity_state_suspects_due_idx
    ON integrity_state (next_due_at, news_id) WHERE gone_since IS NOT NULL;
