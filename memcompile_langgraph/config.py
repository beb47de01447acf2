"""Every constant of the method in one place, with the paper's value and where it is defined.

Two profiles: `MemCompileConfig()` is the project's best measured setting (the default); `MemCompileConfig.paper()`
makes every choice as the paper does. Each field where they differ says so here and has a row in the "Deviations
from the paper" table of docs/configuration.md; fields marked "engineering" are choices the paper leaves open. The
comments say why a value was chosen; the figures live in docs/benchmarks.md."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

DENSE_DOCUMENTS = ("packet", "turn", "turn_terms", "claims")  # MemCompileConfig.dense_document
RENAMED = {"llm_table6_settings": "llm_table6_sampling"}  # keywords MemCompileConfig took before, and their names now
# the session spread's depth when the fused order chooses the packets (no pool reader): worth 2.5 points on BEAM 100K
# there; under the reader it lowers BEAM (docs/cross-validation.md)
SPREAD_DEPTH_FUSED = 60


@dataclass(frozen=True)
class MemCompileConfig:
    profile: str = "default"  # the name reports show: "default" (best measured) or "paper" (MemCompileConfig.paper())

    # --- Bounded Cell placement (Sec. 3.2.2, App. B.2, Eq. 3-4, 17-21, Table 6) ---
    cell_token_capacity: int = 360  # B_C, Eq. 3
    cell_item_capacity: int = 12  # M_C, Eq. 3
    place_beta: float = 1.4  # beta, Eq. 4
    place_gamma: float = 1.0  # gamma, Eq. 4
    place_eta: float = 0.45  # eta, Eq. 4
    coherence_keyword: float = 0.45  # Eq. 18
    coherence_person: float = 0.35  # Eq. 18
    coherence_time: float = 0.20  # Eq. 18
    time_outside_session: float = 0.25  # T(i,c) outside [j_min, j_max+1], Eq. 17
    inconsistency_penalty: float = 0.45  # X(i,c), App. B.2
    span_penalty: float = 0.2  # session-span weight in H(c), Eq. 20
    pressure_entropy: float = 0.4  # Delta_H weight, Eq. 21 (Table 6 "weight 0.4")
    pressure_fill: float = 0.25  # fill term, Eq. 21
    pressure_over_entropy: float = 0.25  # over-threshold entropy term, Eq. 21
    entropy_threshold: float = 1.8  # Eq. 21, Table 6
    new_cell_coherence: float = 0.55  # new-Cell C, App. B.2
    new_cell_pressure: float = 0.65  # new-Cell E = 0.65 + n/B_C, Sec. 3.2.2
    cell_title_keywords: int = 3  # engineering: t_c (Eq. 22) is not defined by the paper; its top-3 keywords name it

    # --- Descriptors (Eq. 2, App. B.1) ---
    max_keywords: int = 5  # Key_i <= 5, App. B.1 / F
    # deviation (paper: False): a turn with no retained fact keeps one descriptor of its own text, so BM25 and Cells
    # reach it; App. B.1 removes such turns from the descriptor set and Eq. 15 renders retained claims only
    factless_claims: bool = True

    # --- Lexical channel (Sec. 3.2.4, App. B.3) ---
    bm25_k1: float = 1.5  # App. B.3
    bm25_b: float = 0.75  # App. B.3
    bm25_epsilon: float = 0.25  # rank-bm25 BM25Okapi idf floor (reference implementation)
    bm25_top: int = 96  # BM25(q) top 96, Eq. 6
    bm25_seeds: int = 8  # routing seeds, App. B.3

    # --- Cell routing (Sec. 3.2.3, Eq. 5, 22-23, Algorithm 3) ---
    route_w_keyword: float = 2.0  # Eq. 22
    route_w_person: float = 2.2  # Eq. 22
    route_w_title: float = 0.7  # Eq. 22
    route_temporal: float = 0.25  # T_q(c), Eq. 22
    route_density: float = 0.03  # Eq. 22
    route_admission: float = 0.08  # base relevance floor, App. B.3
    route_cells_max: int = 6  # B_cell, six-Cell cap, Table 6
    route_cells_min: int = 1  # Table 6
    route_pool_floor: int = 12  # pool = max(12, 6 * B_cell) = 36, App. B.3
    route_pool_per_cell: int = 6  # App. B.3
    route_lambda: float = 0.45  # lambda_R, Eq. 5/23
    route_open_cost: float = 0.02  # kappa_open = 0.02(1+|O|), Eq. 23
    route_token_cost: float = 0.0005  # Eq. 23
    route_relative_floor: float = 0.68  # App. B.3
    route_cumulative: float = 0.90  # App. B.3

    # --- Candidate union (Eq. 6-7, App. B.3) ---
    alpha_f: float = 2.0  # claim-term Jaccard
    alpha_k: float = 1.6  # keyword Jaccard
    alpha_p: float = 2.4  # person Jaccard
    alpha_t: float = 0.3  # temporal match
    alpha_b: float = 0.45  # normalized BM25

    # --- Evidence plane (Sec. 3.4, App. B.3, C.2, Table 6) ---
    k0: int = 10  # K_0 scheduled packets, Eq. 11
    # deviation (paper: K_D = 40, Sec. 3.2.4): a wider dense channel D_q joins the closed pool and the frontier window
    # W_q, which found more gold on both dev sets; with a model the frontier request lists up to ten more candidates
    dense_top: int = 50
    # what the dense channel embeds per packet (index/user.py packet_document): "packet" is the paper's z(p), App.
    # C.2; "turn" the turn as said with its session time; "turn_terms" that plus the claims' people and keywords;
    # "claims" the claims in place of the turn's text.
    # Stored vectors carry a digest of their document: another choice re-embeds a store's packets
    dense_document: str = "packet"
    frontier_rank_cutoff: int = 5  # K_R, Eq. 13; the frontier request asks for the first K_R labels of sigma_q
    frontier_append_cap: int = 2  # K_Delta, Eq. 13
    mmr_support: float = 0.10  # descriptor support weight, App. B.3
    mmr_duplicate: float = 0.58  # max token-overlap penalty, App. B.3
    mmr_same_cell: float = 0.08  # same-Cell penalty, App. B.3

    # --- Evidence fusion (deviation, not in the paper: evidence/fusion.py; weights chosen on the LoCoMo dev split,
    #     checked on held-out conversations). On, it scores the closed pool offline AND with a model: the scheduler
    #     (LLM or not) sees U_q joined by D_q and the best fused packets, in fused order, cut to pool_budget; offline
    #     its top-K0 are the anchors (also for A2/A3). Off (paper): the scheduler sees the complete U_q in Eq. 10
    #     order, and the deterministic anchors (offline, A2/A3, LLM fill) are the App. B.3 MMR Top-K0 ---
    fusion: bool = True
    # z(BM25 over the packet's claim bundle + adjacent turns); chosen under 5-fold CV on both dev sets together
    fusion_lexical: float = 0.9
    fusion_dense: float = 1.0  # z(cosine of q+ and z(p))
    fusion_dense_question: float = 0.5  # z(cosine of the bare question and z(p))
    # z(best single claim's BM25 per packet): passage-level lexical evidence. Off: it helps long chats (BEAM) but
    # costs more on LoCoMo than it gains there
    fusion_passage: float = 0.0
    fusion_passage_min_claims: int = 0  # the passage score only for packets of at least this many claims (0: all)
    fusion_address: float = 0.0  # z(s(p,q)) of Eq. 10; off: the fused ranking is no better with it offline
    fusion_previous: float = 0.2  # support from the preceding turn of the session
    fusion_next: float = 0.2  # support from the following turn of the session
    fusion_speaker: float = 1.5  # the packet's speaker is named in the query
    fusion_temporal: float = 0.3  # a temporal query and a packet whose claims carry an event time
    # a query naming a time ("on 1 May, 2022", "in April 2022") and a packet said within it or with a claim about
    # it; chosen under 5-fold CV on both dev sets (docs/cross-validation.md); 0 = off
    fusion_date: float = 3.0
    # a user-assistant memory: the user asks, so "I/my" points at the user's turns and "you" at the assistant's
    # (the names the remember node and the BEAM loader store); no effect where no speaker has these names (LoCoMo)
    fusion_addressed: float = 3.0  # the best of the weights tried on BEAM (higher ones crowd out other evidence)
    # a turn that only asks ("What is my dog called?") is weak evidence for its own answer, though it shares the
    # question's words: this much is taken off its fused score (text.only_asks); 0 = off. Chosen under 5-fold CV on
    # both dev sets (docs/cross-validation.md)
    fusion_asking: float = 1.5
    # later turns of the memory score up to this much more (linear in dialogue order): a restated fact's newest
    # statement wins over the older one; 0 = off
    fusion_recency: float = 0.0
    self_speaker: str = "User"
    assistant_speaker: str = "Assistant"
    # questions about the whole history (evidence/spread.py): anchors round-robin over the sessions among the best
    # this many pool packets (the gold of such a question lies in many sessions); 0 = off. None = chosen when the
    # memory opens: off when the pool reader loads, whose weights for such questions spread them better than the
    # round robin, which would only reorder what the reader chose; SPREAD_DEPTH_FUSED for the fused order
    spread_depth: int | None = None
    # a history question addressing one speaker ("the order in which I brought up ...") spreads over that speaker's
    # packets first: what the question asks about is what that speaker said
    spread_speaker: bool = True
    # a history question's spread also takes this many of the frontier's K_Delta slots (the frontier would fill them
    # from the one best-matching session); one, so the frontier keeps the other
    spread_frontier_slots: int = 1
    # a history question's context shows its packets in the order they were said (the budget still spends by rank):
    # what it asks is how something went or in what order things came up. Eq. 16 keeps the schedule's order
    history_in_time_order: bool = True
    # knowledge updates (evidence/updates.py newest_statements): the best selected statements call in their subject's
    # newest later statement when its packet vector, or the vector of its speaker's turn just before it, is at least
    # this close to theirs in cosine; 0 = off
    update_newest_cosine: float = 0.6
    # pseudo-relevance feedback, last in the fused score: a second packet-level BM25 pass with at most
    # feedback_terms terms that the query-matching claims of at least two of the best feedback_packets fused packets
    # share (by packets x idf), weighted by fusion_feedback on its z-score; 0 = off. It finds the words a question
    # leaves unsaid; taken after the addressed-speaker bonus, and only from claims that match the query, so a long
    # reply's code and lists bring no terms
    fusion_feedback: float = 0.2
    feedback_packets: int = 5
    feedback_terms: int = 5
    # ...only over memories of at least this many packets: the best 5 of a small memory are much of it, and their
    # shared words are its topic, not the question's
    feedback_min_packets: int = 100
    # a fitted fusion model (evidence/fusion_model.py: a JSON file `memcompile eval ... --fit-fusion` writes): its
    # weights replace the fusion_* weights above when the memory opens; None = the hand-set weights, which the fitted
    # ones did not beat under 5-fold CV on the dev sets (docs/cross-validation.md)
    fusion_model: str | None = None
    # deviation (engineering, not in the paper): a fitted second-stage reader of the closed pool that re-scores the
    # pool and D_q (evidence/reader.py). "shipped" is the one fitted on the three dev sets together under 5-fold CV
    # (docs/cross-validation.md); a path names a JSON file `memcompile eval ... --fit-reader` wrote; None, or a file
    # that cannot be read (one warning), keeps the fused order
    pool_reader: str | None = "shipped"
    pool_proposals: int = 60  # best fused packets joining the closed pool beside D_q
    pool_budget: int = 60  # closed pool U_q cut after fusion
    # deviation (paper: False): without a model the frontier still runs, ordering W_q by fused score (fusion off:
    # a reciprocal-rank fusion of anchor and dense order, engineering). The paper's LLM-free path is A2 (Table 2):
    # MMR anchors and no frontier
    offline_frontier: bool = True
    # deviation (paper: no such step; evidence/repeats.py): copies of one statement take one slot, the newest standing
    # for the rest, and a turn that only asks is read after the statements chosen with it, so that an agent's memory
    # is not filled with its own repeated traffic
    one_slot_per_statement: bool = True

    # --- Context budget (engineering, not in the paper; evidence/budget.py) ---
    # tokens of the rendered context (text.count_tokens: words and punctuation marks); over it, long packets keep
    # their header and best lines. 2,000 leaves LoCoMo's 12-turn contexts whole; None = no budget
    context_max_tokens: int | None = 2000

    # --- Pipeline switches for the controlled ablations of Table 2 (all on = A0, the full system) ---
    use_intent: bool = True  # off = A6: the bare question, no intent people/keywords/time
    use_bm25_candidates: bool = True  # off = A4 Cell-only (BM25 still seeds routing)
    use_cells: bool = True  # off = A5 BM25-only
    use_scheduler: bool = True  # off = A2/A3: deterministic anchors (MMR Top-K0 with fusion off, Table 2)
    use_frontier: bool = True  # off = A1
    dense_only: bool = False  # on = A7: the dense top-K0 packets are the selection

    # --- LLM stages (Sec. 4.1, App. A.2) ---
    llm_temperature: float = 0.0  # Table 6
    llm_max_tokens: int = 2048  # Table 6
    # deviation (paper: True): a chat model you pass keeps its own sampling parameters (the models the CLI builds have
    # Table 6's), with a warning naming what differs; True runs every MemCompile model at Table 6's (or refuses one it
    # cannot set)
    llm_table6_sampling: bool = False
    llm_schedule_retries: int = 3  # schema-correction retries, App. A.2
    llm_concurrency: int = 8
    llm_json_retries: int = 1  # engineering: correction retries for an invalid fact/metadata/intent/judge reply
    llm_schedule_rounds: int = 3  # engineering: bound on the App. A.2 fill rounds before the deterministic fill
    llm_call_attempts: int = 4  # engineering: attempts per request on 429 / 5xx / timeouts
    llm_backoff_seconds: float = 1.0  # engineering: first backoff, doubled per attempt
    llm_backoff_max_seconds: float = 30.0  # engineering: backoff ceiling
    llm_timeout_seconds: float = 60.0  # engineering: per-request timeout of the ChatOpenAI the CLI builds
    llm_candidate_max_chars: int = 1200  # engineering: packet content trimmed in scheduler requests
    llm_max_facts: int = 32  # engineering: claims kept from one fact-extraction reply
    llm_max_people: int = 12  # engineering: names kept from one metadata or intent reply
    llm_max_item_chars: int = 2000  # engineering: a longer claim, name or keyword is cut
    # engineering: knowledge-update marks through the model (evidence/llm_updates.py): candidate pairs per query
    # (one request), characters of each statement sent, and the longest value it may copy out of one
    llm_update_max_pairs: int = 8
    llm_update_max_chars: int = 600
    llm_update_max_value_chars: int = 80

    # --- Engineering limits (not from the paper) ---
    embed_max_chars: int = 4000  # packet document trimmed before embedding
    extract_max_chars: int = 8000  # turn text trimmed before extraction (the packet keeps all of it)
    embed_batch: int = 64
    render_max_chars: int = 4000  # one line of a rendered block (a turn's text, a claim) is cut here, with a marker

    def __new__(cls, *args: Any, **kwargs: Any) -> MemCompileConfig:
        # before the generated __init__, whose error for an old keyword would not say what replaced it
        for old in RENAMED.keys() & kwargs.keys():
            raise TypeError(f"MemCompileConfig has no {old!r}: it is called {RENAMED[old]!r} now")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        if self.dense_document not in DENSE_DOCUMENTS:
            raise ValueError(
                f"dense_document must be one of {', '.join(map(repr, DENSE_DOCUMENTS))}, not {self.dense_document!r}"
            )

    @classmethod
    def paper(cls, **overrides: Any) -> MemCompileConfig:
        """Every choice as the paper makes it; without a model this is its LLM-free path, A2 of Table 2."""
        return cls(**{**PAPER_CHOICES, **overrides})

    @classmethod
    def profile_named(cls, name: str) -> MemCompileConfig:
        if name not in PROFILES:
            raise ValueError(f"unknown profile {name!r} (choose from {', '.join(PROFILES)})")
        return cls.paper() if name == "paper" else cls()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_overrides(self, **overrides: Any) -> MemCompileConfig:
        return replace(self, **overrides)

    def with_reader(self, loaded: bool) -> MemCompileConfig:
        """This config as a memory runs it once it knows whether its pool reader loaded: an unset spread_depth
        becomes SPREAD_DEPTH_FUSED where the fused order chooses without the reader, 0 otherwise. The spread is a
        step of the fused order, so without fusion, as in the paper's profile, it is off."""
        if self.spread_depth is not None:
            return self
        return replace(self, spread_depth=SPREAD_DEPTH_FUSED if self.fusion and not loaded else 0)

    @property
    def route_pool_size(self) -> int:
        return max(self.route_pool_floor, self.route_pool_per_cell * self.route_cells_max)


# the fields where the default deviates from the paper, at the paper's values
PAPER_CHOICES: dict[str, Any] = {
    "profile": "paper",
    "factless_claims": False,
    "fusion": False,
    "offline_frontier": False,
    "one_slot_per_statement": False,
    "history_in_time_order": False,
    "pool_reader": None,
    "dense_top": 40,
    "llm_table6_sampling": True,
}
PROFILES = ("default", "paper")
DEFAULT_CONFIG = MemCompileConfig()

__all__ = ["MemCompileConfig", "DEFAULT_CONFIG", "DENSE_DOCUMENTS", "PAPER_CHOICES", "PROFILES", "SPREAD_DEPTH_FUSED"]
