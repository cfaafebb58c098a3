-- Daily ledger of LLM (Amazon Bedrock) usage by the enrichment stage: calls, tokens, throttling
-- and failures per day (UTC) and model. Rows are added to with an UPSERT
-- (dgb.enrich.ledger.record_usage); production's Bedrock throttling made this worth watching.
CREATE TABLE llm_usage_daily (
    day            date    NOT NULL,
    model_id       text    NOT NULL,
    calls          integer NOT NULL DEFAULT 0 CHECK (calls >= 0),
    input_tokens   bigint  NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens  bigint  NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    throttled      integer NOT NULL DEFAULT 0 CHECK (throttled >= 0),
    failures       integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (day, model_id)
);
