"""Each event-driven stage defined once: when it is ready, when it is done, what is pending, in
which order.

Three consumers read these definitions, so they cannot drift apart: the stage run
(:mod:`dgb.pipeline.runner`: its sweep of pending work and its idempotency check on every loaded
row), ``dgb status`` (:mod:`dgb.observe.status`: the backlog per stage) and reconciliation
(:mod:`dgb.reconcile.stuck`: an article stuck in a stage is one pending there for too long).

Every rule is ONE SQL boolean over ``news``, written two-valued (only ``IS [NOT] NULL`` and
``IS [NOT] DISTINCT FROM``, never a comparison that can yield NULL), so ``NOT rule`` is exactly
its complement and the rules can be combined freely:

* ``ready``: the article can go through the stage now (enrich: not removed; embed: enriched and
  not removed; index: enriched - a removed article is indexed as a delete);
* ``done``: the stage has nothing left to do for it (enrich: ``enriched_at`` set, an edit resets
  it; embed: ``embedded_at`` set by the CURRENT model; index: ``indexed_version = version``,
  every change that affects the document bumps ``version``);
* ``pending`` = ``ready AND NOT done``;
* ``sweep`` = ``pending AND NOT held``: what a stage run takes up by itself. ``held``: the article
  failed permanently in this stage (``hold_stage``, migration 0008: dead-lettered, or parked after
  ``DGB_STAGE_MAX_FAILURES``) and waits for a message, an operator's redrive or an edit. Poison
  rows thus never crowd real work out of the sweep's ``ORDER BY ... LIMIT`` (partial indexes
  ``news_sweep_<stage>_idx`` carry exactly this predicate). ``pending`` keeps counting them, so
  the backlog and reconciliation still see the article as not done.

The current-model rule: ``%(model)s`` in a rule is the current embedding model
(``DGB_EMBEDDING_MODEL``). A vector made by another model is not done, so after a model change
the article is pending for embed in the sweep, in the backlog and in reconciliation alike.
``model=None`` makes any model count (for callers that do not know the model).

``since``: the column that orders the sweep (oldest first) and dates the backlog and a stuck gap.
``start_topic``: the event that starts the stage (what reconciliation re-sends for its gap).
"""

from __future__ import annotations

from dataclasses import dataclass

from dgb import topology

MODEL = "%(model)s::text"  # the current embedding model, a named query parameter (NULL = any)


@dataclass(frozen=True)
class StageDefinition:
    name: str
    subscriptions: tuple[str, ...]  # input subscriptions (their topics give the message schema)
    start_topic: str
    next_topic: str | None
    since: str
    ready: str
    done: str

    @property
    def pending(self) -> str:
        """SQL boolean over ``news``: rows this stage still has to process (named parameter
        ``model``: see :func:`params`)."""
        return f"({self.ready}) AND NOT ({self.done})"

    @property
    def held(self) -> str:
        """SQL boolean over ``news``: the article is held out of this stage's sweep (it failed
        permanently here; see the module doc)."""
        return f"hold_stage IS NOT DISTINCT FROM '{self.name}'"

    @property
    def sweep(self) -> str:
        """SQL boolean over ``news``: pending and not held, what a stage run sweeps up itself
        (named parameter ``model``)."""
        return f"{self.pending} AND hold_stage IS DISTINCT FROM '{self.name}'"


ENRICH = StageDefinition(
    name="enrich",
    subscriptions=(topology.SUB_ENRICHMENT,),
    start_topic=topology.TOPIC_SCRAPED,
    next_topic=topology.TOPIC_ENRICHED,
    since="scraped_at",
    ready="removed_at IS NULL",
    done="enriched_at IS NOT NULL",
)

EMBED = StageDefinition(
    name="embed",
    subscriptions=(topology.SUB_EMBEDDINGS,),
    start_topic=topology.TOPIC_ENRICHED,
    next_topic=topology.TOPIC_EMBEDDED,
    since="enriched_at",
    ready="enriched_at IS NOT NULL AND removed_at IS NULL",
    done=f"embedded_at IS NOT NULL AND ({MODEL} IS NULL OR embedding_model IS NOT DISTINCT FROM {MODEL})",
)

INDEX = StageDefinition(
    name="index",
    subscriptions=(topology.SUB_TYPESENSE, topology.SUB_TYPESENSE_UPDATE),
    start_topic=topology.TOPIC_EMBEDDED,
    next_topic=None,
    since="updated_at",
    ready="enriched_at IS NOT NULL",
    done="indexed_version IS NOT DISTINCT FROM version",
)

# SQL boolean over ``news``: the article's current version is searchable, i.e. the index stage is
# done with it (INDEX.done: indexed at its current version) and it is in the index (``indexed_at``
# set; a removed article's delete leaves it NULL). ``dgb status``'s commit -> searchable latency
# and the pipeline view's latency history (dgb.observe) count exactly these articles.
SEARCHABLE = f"indexed_at IS NOT NULL AND ({INDEX.done})"

# pipeline order: an article goes through them in this order (reconciliation counts it in the first
# one it is pending in)
DEFINITIONS: dict[str, StageDefinition] = {d.name: d for d in (ENRICH, EMBED, INDEX)}


def definition(name: str) -> StageDefinition:
    try:
        return DEFINITIONS[name]
    except KeyError:
        raise ValueError(f"unknown stage {name!r}; expected one of {list(DEFINITIONS)}") from None


def params(model: str | None) -> dict[str, str | None]:
    """The query parameters every rule needs (add your own named parameters to it)."""
    return {"model": model}


def complete() -> str:
    """SQL boolean over ``news``: no stage has anything pending for the article."""
    return " AND ".join(f"NOT ({d.pending})" for d in DEFINITIONS.values())
