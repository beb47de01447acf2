"""What the inspector shows, as data: one user's turns by session, and one query's run through the query graph
with each packet's channel scores and why it was or was not selected. Read from the graph's own output state and
the snapshot the run read; nothing here scores anything the graph did not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...address.routing import Routing
from ...evidence.budget import is_marker
from ...evidence.frontier import frontier_window
from ...evidence.normalize import normalize
from ...evidence.render import render_block, shown_time, update_marks
from ...evidence.updates import topic_terms
from ...index.user import UserIndex
from ...memory import MemCompile
from ...model import Intent, SelectedPacket, SourcePacket
from ...query_graph import STAGES
from ...text.terms import clean_query, count_tokens


def when(p: SourcePacket) -> str:
    """The turn's time as a header shows it (parsed), else as it was given."""
    return shown_time(p) or p.session_time_raw


@dataclass(frozen=True)
class PlacedClaim:
    text: str
    cell_id: str
    cell_title: str


@dataclass(frozen=True)
class Turn:
    packet: SourcePacket
    claims: tuple[PlacedClaim, ...]
    mark: str = ""  # the supersession note of a later turn restating this one's fact with another value


@dataclass(frozen=True)
class Session:
    number: int
    time: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Timeline:
    user: str
    total: int
    offset: int
    limit: int
    about: str
    sessions: tuple[Session, ...]


def _claims(index: UserIndex, packet_id: str) -> tuple[PlacedClaim, ...]:
    out = []
    for d in index.by_packet.get(packet_id, []):
        cell_id = index.layout.of_descriptor.get(d.descriptor_id, "")
        cell = index.layout.cells.get(cell_id)
        out.append(PlacedClaim(d.claim, cell_id, cell.title if cell else ""))
    return tuple(out)


def timeline(mem: MemCompile, user: str, offset: int = 0, limit: int = 200, about: str = "") -> Timeline:
    """The user's turns [offset, offset + limit) in dialogue order, grouped by session. Supersession is decided for
    a question (evidence/updates.py: the attribute a value is of comes from it), so marks are shown for `about`:
    the turns a later turn of the same speaker restates with another value, as a compiled context marks them."""
    index = mem.index(user)
    order = list(index.packet_order)
    marks: dict[str, str] = {}
    if about.strip():
        about = clean_query(about)
        asked = topic_terms(about)
        # only turns with a claim on the question's topics can state a value about it (updates.statement)
        said = lambda pid: [d.claim for d in index.by_packet.get(pid, [])] or [index.packets[pid].text]  # noqa: E731
        related = [pid for pid in order if any(topic_terms(c) & asked for c in said(pid))]
        marks = update_marks(index, related, about)
    sessions: list[Session] = []
    for pid in order[offset : offset + limit]:
        p = index.packets[pid]
        turn = Turn(p, _claims(index, pid), marks.get(pid, ""))
        if sessions and sessions[-1].number == p.session:
            sessions[-1] = Session(p.session, sessions[-1].time, (*sessions[-1].turns, turn))
        else:
            sessions.append(Session(p.session, when(p), (turn,)))
    return Timeline(user, len(order), offset, limit, about, tuple(sessions))


@dataclass
class Row:
    """One packet the query reached through any channel."""

    packet: SourcePacket
    claim: str  # its representative claim (the best-scoring address hit), else its first
    bm25: float | None = None  # best raw BM25 of its claims among BM25(q)
    dense: float | None = None  # cosine with e(q+) when among D_q
    cell: float | None = None  # u(c,q) of the best opened Cell holding one of its claims
    cells: tuple[str, ...] = ()
    address: float | None = None  # s(p,q) = max r_i, Eq. 10
    fused: float | None = None  # offline fusion score (what the pool, anchors and frontier order by)
    pool_rank: int | None = None
    frontier_rank: int | None = None  # position in sigma_q
    selected_rank: int | None = None
    source: str = ""  # anchor / frontier
    why: str = ""  # selected / rank / budget / frontier
    detail: str = ""
    superseded_by: str = ""
    cut: bool = False  # its block lost lines to the token budget
    left_out: bool = False  # selected, but the budget was spent on other packets' lines


@dataclass
class Explanation:
    user: str
    query: str
    intent: Intent
    stages: list[tuple[str, dict[str, Any]]]  # the stage trace (stage_graph.py), in graph order
    bm25: list[tuple[SourcePacket, str, float]]  # (packet, claim, raw score), best first
    routing: Routing
    cell_titles: dict[str, str]
    candidates: list[tuple[SourcePacket, str, float, float, tuple[str, ...]]]  # packet, claim, r_i, b_i, channels
    rows: list[Row]
    context: str
    max_tokens: int | None
    tokens: int
    note: str = ""  # set when nothing is stored for the user
    constants: dict[str, Any] = field(default_factory=dict)

    @property
    def selected(self) -> list[Row]:
        return sorted((r for r in self.rows if r.selected_rank), key=lambda r: r.selected_rank or 0)


def explain(mem: MemCompile, user: str, query: str, max_tokens: int | None = None) -> Explanation:
    """Run the query graph as `compile` does and take apart its output state, read against the snapshot it read."""
    context = mem.context(user)
    query = clean_query(query)
    out = mem.query_graph.invoke({"query": query, "max_tokens": max_tokens}, context=context)
    index, cfg = context.snapshot(), mem.config
    rows: dict[str, Row] = {}

    def row(pid: str) -> Row:
        if pid not in rows:
            claims = index.by_packet.get(pid) or []
            rows[pid] = Row(index.packets[pid], claims[0].claim if claims else index.packets[pid].text)
        return rows[pid]

    bm25 = []
    for pos, score in out.get("bm25", []):
        d = index.descriptors[pos]
        bm25.append((index.packets[d.packet_id], d.claim, float(score)))
        r = row(d.packet_id)
        r.bm25 = max(r.bm25 or 0.0, float(score))
    routing: Routing = out.get("routing", Routing((), 0, ""))
    utility = {rc.cell_id: rc.base for rc in routing.opened}
    candidates = []
    for c in out.get("candidates", []):
        claim = index.descriptors[index.position[c.descriptor_id]].claim
        candidates.append((index.packets[c.packet_id], claim, c.score, c.bm25, c.channels))
        r = row(c.packet_id)
        opened = [cid for ch in c.channels if ch.startswith("cell:") and (cid := ch[5:]) in utility]
        r.cells = tuple(dict.fromkeys([*r.cells, *opened]))
        if opened:
            r.cell = max([r.cell or 0.0, *(utility[cid] for cid in opened)])
    for p in normalize(out.get("candidates", []), index.layout.of_descriptor):
        r = row(p.packet_id)
        r.address = p.score
        r.claim = index.descriptors[index.position[p.representative]].claim
    dense = [h for h in out.get("dense", []) if h.packet_id in index.packets]
    for h in dense:
        row(h.packet_id).dense = h.similarity
    for pid, score in out.get("fused", {}).items():
        row(pid).fused = score
    pool = [p.packet_id for p in out.get("pool", [])]
    for rank, pid in enumerate(pool, 1):
        row(pid).pool_rank = rank
    anchors = out.get("anchors", [])
    order = out.get("frontier_order", [])
    for rank, pid in enumerate(order, 1):
        row(pid).frontier_rank = rank
    reps = {p.packet_id: p.representative for p in out.get("pool", [])}
    blocks = [b for b in out.get("context", "").split("\n\n") if not is_marker(b)]
    shown = [p["packet_id"] for p in out.get("packets", []) if p["shown"]]
    # a shown block that does not start with the packet's whole block (its notes follow that) lost lines
    kept = dict(zip(shown, blocks))
    budget = out.get("max_tokens") or cfg.context_max_tokens
    for packet in map(SelectedPacket.from_dict, out.get("packets", [])):
        r = row(packet.packet_id)
        r.selected_rank, r.source = packet.rank, packet.source
        r.superseded_by = packet.superseded_by or ""
        r.left_out = not packet.shown  # the budget went to the lines of other packets
        r.cut = packet.shown and not kept[packet.packet_id].startswith(
            render_block(index, packet.packet_id, "bundle", reps.get(packet.packet_id))
        )
    window = set(frontier_window(anchors, dense))
    k0, cutoff, cap = cfg.k0, cfg.frontier_rank_cutoff, cfg.frontier_append_cap
    for pid, r in rows.items():
        if r.selected_rank:
            r.why = "selected"
            r.detail = f"#{r.selected_rank}, {'an anchor' if r.source == 'anchor' else 'admitted by the frontier'}"
            if r.cut:
                r.detail += f"; lines cut to fit the {budget}-token budget"
            elif r.left_out:
                r.detail += f"; left out of the context: the {budget}-token budget went to other packets' lines"
        elif r.pool_rank is None and cfg.fusion:
            r.why = "budget"
            r.detail = f"not in the closed pool: the best {cfg.pool_budget} packets by fused score were kept"
        elif pid in window and r.frontier_rank is not None and len(order) > len(anchors):
            r.why = "frontier"
            if r.frontier_rank > cutoff:
                r.detail = f"frontier rank {r.frontier_rank}, past its cutoff K_R = {cutoff}"
            else:
                r.detail = f"frontier rank {r.frontier_rank}: the K_Delta = {cap} added slots went to higher ranks"
        else:
            r.why = "rank"
            where = f"pool rank {r.pool_rank}" if r.pool_rank else "not in the pool"
            r.detail = f"{where}: not among the K0 = {k0} anchors"
    ranked = sorted(
        rows.values(),
        key=lambda r: (
            r.selected_rank or len(rows) + 1,
            r.frontier_rank or len(rows) + 1,
            r.pool_rank or len(rows) + 1,
            -(r.fused if r.fused is not None else r.address or 0.0),
        ),
    )
    trace = out.get("trace", {})
    return Explanation(
        user=context.user,
        query=query,
        intent=out["intent"],
        stages=[(s, trace[s]) for s in STAGES if s in trace],
        bm25=bm25,
        routing=routing,
        cell_titles={rc.cell_id: index.layout.cells[rc.cell_id].title for rc in routing.opened},
        candidates=candidates,
        rows=ranked,
        context=out.get("context", ""),
        max_tokens=budget,
        tokens=count_tokens(out.get("context", "")),
        note=out.get("note", ""),
        constants={
            "K0 (anchors)": k0,
            "K_R (frontier cutoff)": cutoff,
            "K_Delta (frontier slots)": cap,
            "pool budget": cfg.pool_budget if cfg.fusion else "none (fusion off)",
            "BM25 top": cfg.bm25_top,
            "dense top": cfg.dense_top,
        },
    )
