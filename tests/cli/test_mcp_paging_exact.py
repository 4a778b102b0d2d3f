"""MCP's paging and bounding, exactly (mutation run 12): a page's items, total and cursor at each
edge, the cursor refused word for word, and every field of a list item cut with its note."""

from __future__ import annotations

from typing import Any

import pytest

from agentmail.cli import mcp_server
from agentmail.cli.mcp_server import LIST_FIELD, LIST_ITEMS, MAX_INBOX, PAGE
from agentmail.errors import BadInput

REFUSED = "cursor: not a next_cursor this server returned"
IDS = [f"{n:026d}" for n in range(5)]  # spool ids sort as their text


def _items(*ids: str) -> list[dict[str, Any]]:
    return [{"id": i, "n": n} for n, i in enumerate(ids)]


def test_a_list_by_key_is_sorted_and_paged_after_the_cursor() -> None:
    items = _items(IDS[3], IDS[0], IDS[4], IDS[1], IDS[2])
    first = mcp_server._page("inbox", {"limit": 2}, items)
    assert first == {"items": [items[1], items[3]], "total": 5, "next_cursor": IDS[1]}
    second = mcp_server._page("inbox", {"limit": 2, "cursor": IDS[1]}, items)
    assert second == {"items": [items[4], items[0]], "total": 5, "next_cursor": IDS[3]}
    last = mcp_server._page("inbox", {"limit": 2, "cursor": IDS[3]}, items)
    assert last == {"items": [items[2]], "total": 5, "next_cursor": None}


def test_a_page_that_ends_exactly_at_the_last_item_has_no_next_cursor() -> None:
    items = _items(*IDS[:4])
    assert mcp_server._page("held", {"limit": 2, "cursor": IDS[1]}, items)["next_cursor"] is None
    assert mcp_server._page("held", {"limit": 4}, items) == {"items": items, "total": 4, "next_cursor": None}
    assert mcp_server._page("held", {"limit": 3}, items)["next_cursor"] == IDS[2]


def test_the_cursors_own_item_gone_the_page_starts_after_where_it_was() -> None:
    items = _items(IDS[0], IDS[2], IDS[4])
    page = mcp_server._page("notes", {"limit": 1, "cursor": IDS[1]}, items)
    assert page == {"items": [items[1]], "total": 3, "next_cursor": IDS[2]}
    assert mcp_server._page("notes", {"cursor": IDS[4]}, items) == {"items": [], "total": 3, "next_cursor": None}


def test_status_pages_by_thread() -> None:
    rows = [{"thread": "thr-bbbbbb"}, {"thread": "thr-aaaaaa"}, {"thread": "thr-cccccc"}]
    first = mcp_server._page("status", {"limit": 1}, rows)
    assert first == {"items": [rows[1]], "total": 3, "next_cursor": "thr-aaaaaa"}
    second = mcp_server._page("status", {"limit": 1, "cursor": "thr-aaaaaa"}, rows)
    assert second["items"] == [rows[0]]


def test_a_list_by_position_keeps_its_order_and_its_cursor_is_an_offset() -> None:
    items = [{"rank": n} for n in (3, 1, 2)]
    first = mcp_server._page("search", {"limit": 2}, items)
    assert first == {"items": items[:2], "total": 3, "next_cursor": "2"}
    assert mcp_server._page("search", {"limit": 2, "cursor": "2"}, items) == {
        "items": items[2:],
        "total": 3,
        "next_cursor": None,
    }
    assert mcp_server._page("search", {"limit": 3}, items)["next_cursor"] is None


def test_no_limit_is_a_page_of_twenty_and_a_limit_is_at_most_a_thousand() -> None:
    many = [{"rank": n} for n in range(MAX_INBOX + 5)]
    assert len(mcp_server._page("search", {}, many)["items"]) == PAGE == 20
    assert len(mcp_server._page("search", {"limit": MAX_INBOX + 1}, many)["items"]) == MAX_INBOX == 1000
    assert len(mcp_server._page("search", {"limit": MAX_INBOX}, many)["items"]) == MAX_INBOX
    assert mcp_server._limit({"limit": 3.0}) == 3
    assert mcp_server._limit({"limit": MAX_INBOX - 1}) == MAX_INBOX - 1


@pytest.mark.parametrize("cursor", ["x", "-1", "1.5", "1234567890", "\u0661", " 1", ""])
def test_an_offset_cursor_is_one_to_nine_ascii_digits(cursor: str) -> None:
    with pytest.raises(BadInput) as refused:
        mcp_server._offset("thread", {"cursor": cursor})
    assert str(refused.value) == f"bad arguments for thread: {REFUSED}"


def test_an_offset_cursor_of_nine_digits_is_read() -> None:
    assert mcp_server._offset("thread", {"cursor": "123456789"}) == 123456789
    assert mcp_server._offset("thread", {"cursor": "0"}) == 0
    assert mcp_server._offset("thread", {}) == 0


@pytest.mark.parametrize(
    "cursor", ["0" * 25, "0" * 27, "A" * 26, "thr-abcde", "thr-" + "a" * 27, "x" + IDS[0], IDS[0] + "\n", ""]
)
def test_a_key_cursor_is_an_id_or_a_thread_id(cursor: str) -> None:
    with pytest.raises(BadInput) as refused:
        mcp_server._after("inbox", {"cursor": cursor}, _items(*IDS))
    assert str(refused.value) == f"bad arguments for inbox: {REFUSED}"


def test_a_key_cursor_starts_after_the_last_key_not_above_it() -> None:
    items = _items(*IDS)
    assert mcp_server._after("inbox", {}, items) == 0
    assert mcp_server._after("inbox", {"cursor": IDS[0]}, items) == 1
    assert mcp_server._after("inbox", {"cursor": IDS[4]}, items) == 5
    assert mcp_server._after("status", {"cursor": "thr-" + "a" * 26}, [{"thread": "thr-b"}]) == 0
    assert mcp_server._after("status", {"cursor": "thr-aaaaaa"}, [{"thread": "thr-aaaaaa"}]) == 1


def test_every_field_of_an_item_is_cut_with_how_much_more_and_where() -> None:
    long = "x" * (LIST_FIELD + 7)
    item = {
        "id": IDS[0],
        "body": "b" * (LIST_FIELD * 3),  # a body is cut by its own rule, not here
        "subject": long,
        "fits": "y" * LIST_FIELD,
        "cc": [f"c{n}" for n in range(LIST_ITEMS + 3)],
        "nested": {"detail": long, "list": [long]},
        "count": 7,
    }
    cut = "x" * LIST_FIELD + f"… [7 more chars: show {IDS[0]}]"
    assert mcp_server._bounded(item) == {
        "id": IDS[0],
        "body": item["body"],
        "subject": cut,
        "fits": item["fits"],
        "cc": [f"c{n}" for n in range(LIST_ITEMS)] + [f"… [3 more: show {IDS[0]}]"],
        "nested": {"detail": cut, "list": [cut]},
        "count": 7,
    }


def test_a_list_of_exactly_the_limit_is_whole_and_an_item_without_an_id_points_at_its_thread() -> None:
    whole = [str(n) for n in range(LIST_ITEMS)]
    assert mcp_server._bounded({"thread": "thr-abcdef", "cc": whole}) == {"thread": "thr-abcdef", "cc": whole}
    over = mcp_server._bounded({"thread": "thr-abcdef", "cc": [*whole, "more"], "subject": "s" * (LIST_FIELD + 1)})
    assert over["cc"][-1] == "… [1 more: thread thr-abcdef]"
    assert over["subject"] == "s" * LIST_FIELD + "… [1 more chars: thread thr-abcdef]"
    assert mcp_server._bounded({"subject": "s" * (LIST_FIELD + 1)})["subject"].endswith("[1 more chars: thread ]")


def test_a_page_refuses_a_bad_cursor_naming_its_list() -> None:
    for name, cursor in (("search", "x"), ("inbox", "x")):
        with pytest.raises(BadInput) as refused:
            mcp_server._page(name, {"cursor": cursor}, [])
        assert str(refused.value) == f"bad arguments for {name}: {REFUSED}"
