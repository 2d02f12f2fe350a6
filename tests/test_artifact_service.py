"""Unit tests for `ArtifactService` (on a real SQLite store), `replace_once` and the fuzzy matcher.

tests/test_artifacts.py drives the same code through the agent tools; these tests pin the
service's contract (return values, typed errors and their details, version rules) and the
matcher's rules directly, with a few Hypothesis properties.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from artifactflow.artifacts import (
    FUZZY_THRESHOLD,
    ArtifactExistsError,
    ArtifactNotFoundError,
    ArtifactService,
    EditMatchError,
    InvalidArtifactError,
    StaleArtifactError,
    find_closest,
    replace_once,
    similarity,
)
from artifactflow.core.store.repository import AppStore
from artifactflow.errors import ArtifactConflictError, NotFoundError, UserError

CONV = "c1"
DOC = "# Plan\n\n1. Collect the data\n2. Write the summary\n3. Send it to the team\n"
PROPERTY = settings(max_examples=60, deadline=None, database=None)


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[AppStore]:
    app_store = await AppStore.open(None, sqlite_path=tmp_path / "a.db")
    try:
        yield app_store
    finally:
        await app_store.close()


@pytest.fixture
def service(store: AppStore) -> ArtifactService:
    return ArtifactService(store)


async def make_plan(service: ArtifactService) -> None:
    await service.create(CONV, "plan", title=" Plan ", content=DOC, agent="lead", message_id="m1")


# --- write path and version rules ------------------------------------------------------------


async def test_create_returns_version_1_and_normalizes(
    service: ArtifactService, store: AppStore
) -> None:
    change = await service.create(
        CONV, "data", title="  Data  ", content="{}", content_type=" JSON "
    )
    assert (change.artifact_id, change.title, change.content_type) == (
        "data",
        "Data",
        "application/json",
    )
    assert (change.version, change.previous_version, change.change, change.size) == (
        1,
        None,
        "create",
        2,
    )
    row = await store.get_artifact(CONV, "data")
    assert row is not None and row["title"] == "Data" and row["content_type"] == "application/json"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"artifact_id": "a b"}, "invalid id"),
        ({"artifact_id": "x" * 129}, "limit is 128"),
        ({"title": " "}, "title must not be empty"),
        ({"title": "t" * 501}, "limit is 500"),
        ({"content_type": "text/"}, "invalid content_type"),
        ({"content_type": "  "}, "content_type must not be empty"),
    ],
)
async def test_create_rules(
    service: ArtifactService, store: AppStore, kwargs: dict[str, Any], fragment: str
) -> None:
    args: dict[str, Any] = {
        "artifact_id": "ok",
        "title": "T",
        "content": "x",
        "content_type": "text/plain",
    }
    args.update(kwargs)
    with pytest.raises(InvalidArtifactError, match=fragment) as caught:
        await service.create(CONV, args.pop("artifact_id"), **args)
    assert isinstance(caught.value, UserError)
    assert await store.list_artifacts(CONV) == []


async def test_create_twice_names_what_exists(service: ArtifactService) -> None:
    await make_plan(service)
    await service.rewrite(CONV, "plan", "new\n")
    with pytest.raises(ArtifactExistsError) as caught:
        await service.create(CONV, "plan", title="Other", content="x")
    error = caught.value
    assert isinstance(error, ArtifactConflictError)
    assert "now at version 2, titled 'Plan'" in str(error)
    assert error.details == {"artifact_id": "plan", "exists": True}


async def test_replace_exact_and_fuzzy_record_where_they_landed(
    service: ArtifactService, store: AppStore
) -> None:
    await make_plan(service)
    exact = await service.replace(
        CONV, "plan", "2. Write the summary", "2. Write the report", agent="a", message_id="m2"
    )
    assert (exact.version, exact.previous_version, exact.change) == (2, 1, "update")
    assert exact.edit is not None and (
        exact.edit.match,
        exact.edit.line,
        exact.edit.similarity,
    ) == ("exact", 4, 1.0)
    fuzzy = await service.replace(CONV, "plan", "3. Sned it to the taem", "3. Publish it")
    assert fuzzy.edit is not None and fuzzy.edit.match == "fuzzy"
    assert fuzzy.edit.replaced == "3. Send it to the team"
    assert FUZZY_THRESHOLD <= fuzzy.edit.similarity < 1.0
    row = await store.get_artifact(CONV, "plan")
    assert row is not None and row["version"] == 3
    assert row["content"] == "# Plan\n\n1. Collect the data\n2. Write the report\n3. Publish it\n"
    history = await service.versions(CONV, "plan")
    assert [(v["version"], v["change"], v["agent"], v["message_id"]) for v in history] == [
        (1, "create", "lead", "m1"),
        (2, "update", "a", "m2"),
        (3, "update", None, None),
    ]


async def test_rewrite_version_rules(service: ArtifactService, store: AppStore) -> None:
    await make_plan(service)
    same = await service.rewrite(CONV, "plan", DOC, title="Plan")
    assert (same.change, same.version) == ("none", 1)
    assert len(await store.artifact_versions(CONV, "plan")) == 1
    retitled = await service.rewrite(CONV, "plan", DOC, title="  Better plan ")
    assert (retitled.change, retitled.version, retitled.title) == ("rewrite", 2, "Better plan")
    kept = await service.rewrite(CONV, "plan", "short\n")
    assert (kept.version, kept.title, kept.size) == (3, "Better plan", 6)
    first = await service.get(CONV, "plan", 1)
    assert (first["title"], first["content"], first["current_version"]) == ("Plan", DOC, 3)
    with pytest.raises(InvalidArtifactError, match="title must not be empty"):
        await service.rewrite(CONV, "plan", "x", title="")


async def test_a_stale_write_changes_nothing(service: ArtifactService, store: AppStore) -> None:
    await make_plan(service)

    class Interfering:
        """The store, with another writer landing between this service's read and write."""

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        async def get_artifact(
            self, conversation_id: str, artifact_id: str
        ) -> dict[str, Any] | None:
            row = await store.get_artifact(conversation_id, artifact_id)
            assert row is not None
            await store.write_artifact_version(
                conversation_id,
                artifact_id,
                expected_version=row["version"],
                content=row["content"] + "4. Celebrate\n",
                change="update",
            )
            return row

    with pytest.raises(StaleArtifactError) as caught:
        await ArtifactService(Interfering()).replace(CONV, "plan", "1. Collect", "1. Gather")
    assert isinstance(caught.value, ArtifactConflictError)
    assert caught.value.details == {"artifact_id": "plan", "conflict": True, "expected_version": 1}
    row = await store.get_artifact(CONV, "plan")
    assert row is not None and row["version"] == 2
    assert row["content"] == DOC + "4. Celebrate\n"


async def test_racing_writers_never_lose_a_reported_edit(
    service: ArtifactService, store: AppStore
) -> None:
    await make_plan(service)
    edits = [("1. Collect", "1. Gather"), ("2. Write", "2. Draft"), ("3. Send", "3. Mail")]
    outcomes = await asyncio.gather(
        *(service.replace(CONV, "plan", old, new) for old, new in edits), return_exceptions=True
    )
    assert all(isinstance(o, StaleArtifactError) or o.change == "update" for o in outcomes)
    row = await store.get_artifact(CONV, "plan")
    assert row is not None
    for (old, new), outcome in zip(edits, outcomes, strict=True):
        assert (new in row["content"]) is not isinstance(outcome, Exception)
        assert (old in row["content"]) is isinstance(outcome, Exception)
    assert row["version"] == 1 + sum(not isinstance(o, Exception) for o in outcomes)


async def test_missing_artifacts_and_versions(service: ArtifactService) -> None:
    with pytest.raises(ArtifactNotFoundError, match="has no artifacts yet") as empty:
        await service.replace(CONV, "plan", "a", "b")
    assert isinstance(empty.value, NotFoundError)
    await make_plan(service)
    await service.create(CONV, "notes", title="Notes", content="n")
    with pytest.raises(ArtifactNotFoundError, match="available ids: 'plan', 'notes'"):
        await service.rewrite(CONV, "other", "x")
    with pytest.raises(ArtifactNotFoundError, match="no version 4; versions 1 to 1") as version:
        await service.get(CONV, "plan", 4)
    assert version.value.details == {"artifact_id": "plan", "current_version": 1}


async def test_list_and_diff(service: ArtifactService) -> None:
    await make_plan(service)
    await service.replace(CONV, "plan", "the team", "everyone")
    listed = await service.list(CONV)
    assert [(a["artifact_id"], a["title"], a["version"]) for a in listed] == [("plan", "Plan", 2)]
    diff = await service.diff(CONV, "plan", 1, context=0)
    assert diff == (
        "--- plan@v1\n+++ plan@v2\n@@ -5 +5 @@\n-3. Send it to the team\n+3. Send it to everyone\n"
    )


# --- replace_once: when an edit is refused ----------------------------------------------------


def test_refusals_carry_their_facts() -> None:
    def refuse(content: str, old: str, new: str = "x") -> EditMatchError | InvalidArtifactError:
        with pytest.raises((EditMatchError, InvalidArtifactError)) as caught:
            replace_once(content, old, new, artifact_id="doc", version=3)
        return caught.value

    assert "must not be empty" in str(refuse(DOC, ""))
    assert "identical" in str(refuse(DOC, "Plan", "Plan"))
    often = refuse("a-b\na-b\n" * 7, "a-b")
    assert often.details["occurrences"] == 14
    assert "at lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …" in str(often)
    assert "was not found" in str(refuse(DOC, "zq"))  # too short for an approximate match
    assert "the artifact is empty" in str(refuse("", "some text"))
    ambiguous = refuse("alpha: value ready\nbeta\nalpha: value ready\n", "alpha: valeu ready")
    assert ambiguous.details["match"] == "ambiguous" and "2 places" in str(ambiguous)
    far = refuse(DOC, "4. Archive every file in the shared drive")
    assert far.details["match"] == "none" and far.details["similarity"] < FUZZY_THRESHOLD
    assert far.details["closest"] in DOC and far.details["closest"] in str(far)


def test_a_weaker_second_match_is_not_a_rival() -> None:
    content = "alpha: the value is ready\nbeta\nalpha: the value was ready\n"
    result = replace_once(content, "alpha: the valeu is ready", "x", artifact_id="d", version=1)
    assert result.match == "fuzzy" and result.replaced == "alpha: the value is ready"
    assert result.content == "x\nbeta\nalpha: the value was ready\n"


def test_long_closest_text_is_cut_in_the_middle() -> None:
    body = "".join(f"line {i}: {'word ' * 8}\n" for i in range(200))
    with pytest.raises(EditMatchError) as caught:
        replace_once(body, body[:5000].replace("word", "term"), "x", artifact_id="d", version=1)
    closest = caught.value.details["closest"]
    assert "characters omitted" in closest and len(closest) < 1600


# --- the fuzzy matcher's rules ----------------------------------------------------------------


def best(content: str, target: str) -> str:
    return find_closest(content, target)[0].text


def test_rule_1_borrowed_neighbours_are_left_out() -> None:
    content = "## Code\ndef total(items):\n    return sum(items)\n\n## Next steps\n"
    assert (
        best(content, "def total(items):\n  return sum(items)\n")
        == "def total(items):\n    return sum(items)\n"
    )


def test_rule_2_polishes_over_a_transposed_edge() -> None:
    content = "one\n    brown total prices rose in\nnext line\n"
    assert best(content, "    brown total prices rose ni\n") == "    brown total prices rose in\n"


def test_rule_2_a_short_target_keeps_its_best_window() -> None:
    # the block alignment starts a word early here; the partial_ratio window does not
    content = "two seven seven\nsix seven nine three four three seven\nsix seven ten on"
    target = "sevne\nsix sevne nine thre four thre se"
    assert best(content, target) == "seven\nsix seven nine three four three se"


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("Xrices rose by 4% in the quarter.", "Prices rose by 4% in the quarter."),
        ("Prices rose by 4% in the quarter,", "Prices rose by 4% in the quarter."),
        ("and then the second qucik", "and then the second quick"),
        ("brown quick def return items jumps dee", "brown quick def return items jumps def"),
    ],
)
def test_rule_3_edge_substitutions_are_taken_in(target: str, expected: str) -> None:
    content = f"intro\n{expected}\noutro\n"
    assert best(content, target) == expected


def test_long_targets_in_repetitive_text() -> None:
    rng = random.Random(5)
    words = "one two three four five six seven eight nine ten".split()
    content = " ".join(rng.choice(words) for _ in range(6000))
    start = content.index(" ", 15000) + 1
    stretch = content[start : content.index(" ", start + 2000)]
    match = find_closest(content, stretch.replace("three", "thre"))[0]
    assert (match.start, match.text) == (start, stretch)
    assert match.line == 1 and match.similarity > 0.98


def test_several_candidates_best_first() -> None:
    content = "\n".join(["the value is ready", "other text here", "the value is steady", "zzz"])
    matches = find_closest(content, "the valeu is ready", limit=3)
    assert [m.text for m in matches[:2]] == ["the value is ready", "the value is steady"]
    assert [m.line for m in matches[:2]] == [1, 3]


# --- properties -----------------------------------------------------------------------------

TEXT = st.text(alphabet="abcde \n", max_size=120)


@PROPERTY
@given(content=TEXT, target=st.text(alphabet="abcdef \n", min_size=1, max_size=40))
def test_candidates_are_consistent(content: str, target: str) -> None:
    matches = find_closest(content, target)
    assert len(matches) <= 3
    assert [m.similarity for m in matches] == sorted((m.similarity for m in matches), reverse=True)
    for i, m in enumerate(matches):
        assert m.text == content[m.start : m.end] and m.text
        assert m.similarity == pytest.approx(similarity(m.text, target))
        assert m.line == content.count("\n", 0, m.start) + 1
        assert all(m.end <= o.start or o.end <= m.start for o in matches[i + 1 :])


@PROPERTY
@given(a=st.text(alphabet="abc", max_size=12), b=st.text(alphabet="abc", max_size=12))
def test_similarity_is_the_lcs_ratio(a: str, b: str) -> None:
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            lcs[i + 1][j + 1] = lcs[i][j] + 1 if x == y else max(lcs[i][j + 1], lcs[i + 1][j])
    expected = 1.0 if not a and not b else 2 * lcs[-1][-1] / (len(a) + len(b))
    assert similarity(a, b) == pytest.approx(expected)
    assert similarity(a, b) == pytest.approx(similarity(b, a))


@PROPERTY
@given(content=TEXT, data=st.data())
def test_a_unique_exact_passage_is_replaced_exactly(content: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(content)))
    end = data.draw(st.integers(start, len(content)))
    old = content[start:end]
    if not old or content.count(old) != 1:
        return
    result = replace_once(content, old, "<new>", artifact_id="d", version=1)
    assert result.match == "exact"
    assert result.content == content.replace(old, "<new>", 1)


@PROPERTY
@given(
    lines=st.lists(
        st.text(alphabet="abcdefghij ", min_size=24, max_size=60), min_size=1, max_size=12
    ),
    data=st.data(),
)
def test_one_typo_inside_a_line_is_found_there(lines: list[str], data: st.DataObject) -> None:
    lines = [f"L{i}: {line}" for i, line in enumerate(lines)]
    content = "\n".join(lines) + "\n"
    pick = data.draw(st.integers(0, len(lines) - 1))
    line, line_start = lines[pick], content.index(lines[pick] + "\n")
    assume(all(similarity(other, line) < 0.75 for other in lines if other != line))  # unique
    where = data.draw(st.integers(1, len(line) - 2))
    target = line[:where] + "#" + line[where + 1 :]  # '#' never occurs in the content
    result = replace_once(content, target, "<new>", artifact_id="d", version=1)
    assert result.match == "fuzzy" and result.line == pick + 1
    assert result.similarity >= FUZZY_THRESHOLD
    # the replaced stretch lies in that line and covers the typo; only a run of one repeated
    # character at an edge of the line may be shortened (Indel prefers dropping to substituting)
    start = content.index(result.replaced, line_start)
    assert line_start <= start <= line_start + where < start + len(result.replaced)
    assert start + len(result.replaced) <= line_start + len(line)
    assert len(set(line[: start - line_start + 1])) == 1
    assert len(set(line[start - line_start + len(result.replaced) - 1 :])) == 1
