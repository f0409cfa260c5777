"""Agent sessions as a workload (``--workload agent``): a user is an agent, not a person chatting.

A session is what a coding agent does with one task (docs/agents.md tells the whole loop): a
system prompt with tools, the task, then tool-call steps, each tool's time (the *tool gap*)
and synthetic result appended, sub-agents joining before their parent's next call, the main
agent's last call the answer.

This module makes the sessions as values (``AgentSession``: a ``Conversation`` with its plan),
synthetic (``synthetic_sessions``: every knob of ``AgentSpec`` a range, seeded) or read from a
file (``workload.agent_traces``), and a ``Workload`` of them (``agent_workload``) that any load
shape plays (load.agent), a scenario's traffic class too. A session's text is made when it is
played (``task_text``, ``result_text``: one-token words drawn from its seed), so two thousand
sessions of 20 steps and 2,000-token tool results cost a few kilobytes until they run.

The run's salt (workload.salt) goes first in a session's first message, its system prompt:
every call of one run shares that prefix, as one agent product's sessions do.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Sequence

from llmbench.workload.model import Conversation, Turn, Workload
from llmbench.workload.salt import vocabulary     # one-token words: the salt's vocabulary

# Ceilings on what one session may ask (issue 49), checked before any load wherever a number
# comes from (a flag, a trace, a scenario class): past them a run builds text for minutes,
# runs out of memory or never ends. A prompt part or a reply of 2M tokens is past any model's
# context today; a gap is at most 30 days (as --agent-tool-latency and a chat trace replay).
MAX_AGENT_TOKENS = 2_000_000
MAX_AGENT_STEPS = 10_000        # calls of one agent
MAX_AGENT_WIDTH = 1_000         # sub-agents one call starts
MAX_AGENT_DEPTH = 64            # sub-agent levels: the plans are walked recursively
MAX_GAP_S = 30 * 86400.0

# the one-token words results and tasks are made of, when the tokenizer names none
_FALLBACK_VOCAB = ("alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "ember", "north",
                   "maple", "cedar", "amber", "lunar", "coral", "ridge", "orbit")

# What the synthetic tools look like: a coding agent's usual ones (name, what it does, its
# parameters). Their definitions count towards the system + tools prompt size.
_TOOLS = (
    ("read_file", "Read a file of the repository and return its text.",
     {"path": "The file's path, from the repository root.", "offset": "First line to read.",
      "limit": "How many lines to read."}),
    ("run_command", "Run a shell command in the workspace and return what it printed.",
     {"command": "The command line.", "timeout_s": "Seconds before it is stopped."}),
    ("search_code", "Search the repository for a pattern and return the matching lines.",
     {"pattern": "A regular expression.", "path": "A folder to search in."}),
    ("edit_file", "Replace a passage of a file with new text.",
     {"path": "The file's path.", "old": "The exact text to replace.", "new": "The new text."}),
    ("list_dir", "List a folder's entries.", {"path": "The folder's path."}),
    ("fetch_url", "Fetch a web page and return its text.", {"url": "The page's URL."}),
    ("run_tests", "Run the test suite, or some tests, and return the failures.",
     {"select": "Which tests: a path or an expression."}),
    ("write_file", "Write a new file.", {"path": "The file's path.", "text": "Its content."}),
)


def synthetic_tools(n: int) -> tuple[dict[str, Any], ...]:
    """``n`` tool definitions in chat's form ({"type": "function", "function": {...}}): the
    usual coding-agent tools first, then numbered ones."""
    out = []
    for i in range(n):
        if i < len(_TOOLS):
            name, desc, params = _TOOLS[i]
        else:
            name, desc, params = f"tool_{i}", f"Tool number {i}.", {"input": "What it takes."}
        props = {k: {"type": "integer" if k in ("offset", "limit", "timeout_s") else "string",
                     "description": v} for k, v in params.items()}
        out.append({"type": "function", "function": {
            "name": name, "description": desc,
            "parameters": {"type": "object", "properties": props,
                           "required": [next(iter(params))]}}})
    return tuple(out)


# -- the plan of a session ----------------------------------------------------------------------
@dataclass(frozen=True)
class StepPlan:
    """One model call of an agent: ``new_tokens`` appended before it (the task, for an agent's
    first call; the previous call's tool result after that), ``gap_s`` waited before it (the
    tool's time; 0 for a first call), the reply length asked, and the sub-agents its reply
    starts (module doc; ``AgentPlan.background``)."""

    id: str
    new_tokens: int
    reply_tokens: int
    gap_s: float = 0.0
    spawn: tuple["AgentPlan", ...] = ()


@dataclass(frozen=True)
class AgentPlan:
    """An agent (the session's main one, or a sub-agent): its system prompt (system + tool
    definitions; shared by every agent of the same text), its calls in order."""

    name: str
    system: str
    system_tokens: int
    steps: tuple[StepPlan, ...]
    background: bool = False          # a sub-agent its parent does not wait for

    def walk(self) -> "list[AgentPlan]":
        """This agent and every sub-agent under it, depth first."""
        out: list[AgentPlan] = [self]
        for st in self.steps:
            for sub in st.spawn:
                out.extend(sub.walk())
        return out

    @property
    def calls(self) -> int:
        """Model calls of this agent and its sub-agents."""
        return sum(len(a.steps) for a in self.walk())


@dataclass(frozen=True)
class AgentSession(Conversation):
    """One session as a workload value: a Conversation (``id``; ``system`` the main agent's
    system prompt; ``turns`` one per main-agent call, so what counts conversations and turns
    counts it) with its ``plan``, the ``tools`` it offers (chat's form), the words its tool
    results and tasks are drawn from, and the seed they are drawn with."""

    plan: AgentPlan | None = None
    tools: tuple[dict[str, Any], ...] = ()
    vocab: tuple[str, ...] = ()
    seed: int = 0

    def task_text(self, agent: AgentPlan) -> str:
        """The agent's task (its first user message): its first call's new tokens, starting
        with the session's and the agent's names so no two sessions' tasks share a prefix."""
        st = agent.steps[0]
        head = f"Task {self.id} {agent.name}:"
        return _words(self.vocab, st.new_tokens, f"{self.seed}:{self.id}:{agent.name}", head)

    def result_text(self, agent: AgentPlan, step: StepPlan) -> str:
        """The tool result appended before ``step`` (its new tokens), synthetic and seeded."""
        return _words(self.vocab, step.new_tokens, f"{self.seed}:{self.id}:{step.id}")


def _words(vocab: Sequence[str], n: int, seed: str, head: str = "") -> str:
    """``n`` one-token words drawn with ``seed``, ``head`` among them (about a token a word)."""
    rng = random.Random(seed)
    have = len(head.split())
    words = rng.choices(vocab or _FALLBACK_VOCAB, k=max(n - have, 1))
    return (head + " " + " ".join(words)).strip() if head else " ".join(words)


# -- synthetic sessions -------------------------------------------------------------------------
IntRange = tuple[int, int]
FloatRange = tuple[float, float]


@dataclass(frozen=True)
class AgentSpec:
    """The synthetic agent workload: every knob a range (LO, HI), drawn per session or per call
    from the seed. Defaults: a coding agent on a local server, scaled down."""

    system_tokens: IntRange = (2000, 4000)     # system prompt + tool definitions
    task_tokens: IntRange = (50, 200)          # the user's task (the first user message)
    steps: IntRange = (4, 10)                  # the main agent's model calls, its answer included
    result_tokens: IntRange = (200, 1000)      # each tool result appended
    tool_latency_s: FloatRange = (0.2, 2.0)    # each tool's time (the gap before the next call)
    call_tokens: IntRange = (32, 128)          # the reply length asked of a tool-call step
    answer_tokens: IntRange = (128, 512)       # the reply length asked of a final answer
    fanout_share: float = 0.0                  # the share of calls whose reply starts sub-agents
    fanout_width: IntRange = (2, 3)            # how many sub-agents such a call starts
    sub_steps: IntRange = (2, 4)               # a sub-agent's calls, its answer included
    systems: int = 1                           # distinct system prompts (1: one agent product)
    tools: int = 4                             # synthetic tool definitions (--tools FILE: its own)

    def describe(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

def _draw(rng: random.Random, r: IntRange) -> int:
    return r[0] if r[0] >= r[1] else rng.randint(r[0], r[1])


def _draw_s(rng: random.Random, r: FloatRange) -> float:
    return r[0] if r[0] >= r[1] else rng.uniform(r[0], r[1])


def _agent(rng: random.Random, spec: AgentSpec, name: str, prefix: str, system: str,
           system_tokens: int, steps: int, depth: int) -> AgentPlan:
    plan: list[StepPlan] = []
    for k in range(steps):
        final = k == steps - 1
        new = _draw(rng, spec.task_tokens) if k == 0 else _draw(rng, spec.result_tokens)
        gap = 0.0 if k == 0 else _draw_s(rng, spec.tool_latency_s)
        reply = _draw(rng, spec.answer_tokens if final else spec.call_tokens)
        spawn: tuple[AgentPlan, ...] = ()
        # sub-agents start from a call (never the answer) of the main agent only: one level
        if not final and depth == 0 and spec.fanout_share > 0 and rng.random() < spec.fanout_share:
            width = _draw(rng, spec.fanout_width)
            spawn = tuple(_agent(rng, spec, f"{name}.{k}.{j}", f"{prefix}{k}.{j}/", system,
                                 system_tokens, _draw(rng, spec.sub_steps), depth + 1)
                          for j in range(width))
        plan.append(StepPlan(f"{prefix}{k}", new, reply, gap, spawn))
    return AgentPlan(name, system, system_tokens, tuple(plan))


def system_prompts(tok: Any, spec: AgentSpec, seed: int, tools: Sequence[dict[str, Any]],
                   reserve: int = 0) -> list[tuple[str, int]]:
    """The ``spec.systems`` system prompts, (text, tokens with the tools' definitions), each
    sized so that with the tool definitions it is about its drawn size. ``reserve``: the salt
    goes first in them, and is counted in the size asked."""
    from llmbench.workload.synthetic import prepare_unit_words, text_of_tokens
    prepare_unit_words(tok)
    tools_tokens = _count(tok, json.dumps(list(tools))) if tools else 0
    rng = random.Random(seed * 31 + 17)
    out = []
    for i in range(max(spec.systems, 1)):
        n = _draw(rng, spec.system_tokens)
        text_n = max(n - tools_tokens, 16)
        head = f"You are coding agent {i}. Use the tools to complete the task."
        text = text_of_tokens(tok, random.Random(seed * 1000 + i), text_n, head, reserve)
        out.append((text, text_n + tools_tokens))
    return out


def _count(tok: Any, text: str) -> int:
    local = getattr(tok, "local", None) or tok
    try:
        return int(local.count(text))
    except Exception:                     # noqa: BLE001 - a tokenizer that cannot count now
        return len(text) // 4


def synthetic_sessions(tok: Any, count: int, spec: AgentSpec, seed: int,
                       tools: Sequence[dict[str, Any]] | None = None,
                       reserve: int = 0) -> list[AgentSession]:
    """``count`` synthetic sessions (their plans; the text is made as they are played)."""
    tools = tuple(tools) if tools else synthetic_tools(spec.tools)
    systems = system_prompts(tok, spec, seed, tools, reserve)
    vocab = vocabulary(tok)
    rng = random.Random(seed)
    out = []
    for c in range(count):
        system, sys_tokens = systems[c % len(systems)]
        plan = _agent(rng, spec, "main", "", system, sys_tokens, _draw(rng, spec.steps), 0)
        out.append(session_of(f"agent-{c}", plan, tools, vocab, seed))
    return out


def session_of(sid: str, plan: AgentPlan, tools: tuple[dict[str, Any], ...],
               vocab: tuple[str, ...], seed: int) -> AgentSession:
    """An AgentSession for ``plan`` (its turns: one per main-agent call)."""
    turns = tuple(Turn(f"step {st.id}", st.reply_tokens) for st in plan.steps)
    return AgentSession(sid, turns, plan.system, plan=plan, tools=tools, vocab=vocab, seed=seed)


def agent_workload(spec: AgentSpec, tok: Any, count: int, seed: int,
                   tools: Sequence[dict[str, Any]] | None = None, reserve: int = 0) -> Workload:
    """``count`` synthetic sessions as a Workload (their system prompt shared on purpose)."""
    sessions = synthetic_sessions(tok, count, spec, seed, tools, reserve)
    return sessions_workload(sessions, tok, seed, "agent", {"agent": spec.describe()})


def sessions_workload(sessions: list[AgentSession], tok: Any, seed: int, source: str,
                      params: dict[str, Any], warnings: list[str] | None = None) -> Workload:
    """A Workload of agent sessions (synthetic or read from a file)."""
    first = [(s.plan.system_tokens, s.plan.steps[0].new_tokens) for s in sessions if s.plan]
    # the share of a first prompt that is the shared system prompt: a prefix cache rightly
    # holds it (the first-turn cache check must not call that flattery)
    shared = (sum(a for a, _ in first) / max(sum(a + b for a, b in first), 1)) if first else 0.0
    info = tok.describe() if hasattr(tok, "describe") else {}
    calls = sum(s.plan.calls for s in sessions if s.plan)
    params = {**params, "sessions": len(sessions), "model_calls": calls,
              "tools": [t["function"]["name"] for t in (sessions[0].tools if sessions else ())]}
    return Workload(list(sessions), source=source, tokenizer=getattr(tok, "name", "?"),
                    seed=seed, params=params, warnings=list(warnings or []),
                    tokenizer_info=info, shared_share=shared)


def is_agent(conv: Any) -> bool:
    return isinstance(conv, AgentSession) and conv.plan is not None

