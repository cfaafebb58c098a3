-- robots.txt shared by every task (dgb.fetch, dgb.hostbudget): each scrape or integrity task is a
-- new process, and without this each one fetched robots.txt again before its first page; at ~160
-- agencies every 10 minutes that was about a third of the polite request budget of www.gov.br.
-- Only definite answers are shared (2xx: the rules; 4xx: no rules, allow all). A 5xx or a network
-- error stays in the task that saw it (RFC 9309: disallow all for now, ask again later).
CREATE TABLE robots_cache (
    robots_url  text PRIMARY KEY,
    status      integer NOT NULL CHECK (status BETWEEN 200 AND 499),
    body        text NOT NULL DEFAULT '',
    fetched_at  timestamptz NOT NULL DEFAULT now()
);
