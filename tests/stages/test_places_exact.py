"""``stages/evidence.places_of`` exactly (issue 37's mutation run 11): which guarded place a path
lies in — as written, as its folder resolves, where a link inside a place leads, or the same
folder under another name — and the first place named wins wherever two hold the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.stages import evidence


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    (home / "registry" / "platforms").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    return home, home / "registry"


def test_a_path_as_written_is_in_the_first_place_named_that_holds_it(tmp_path: Path) -> None:
    home, registry = _tree(tmp_path)
    inner_first = evidence.places_of([(registry, "R"), (home, "H")])
    assert inner_first(str(registry)) == "R"
    assert inner_first(str(registry / "platforms" / "gamma.toml")) == "R"
    assert inner_first(str(home / "secrets" / "alpha.key")) == "H"
    assert inner_first(str(home)) == "H"
    outer_first = evidence.places_of([(home, "H"), (registry, "R")])
    assert outer_first(str(registry / "platforms" / "gamma.toml")) == "H"
    # a sibling whose name begins with the place's, the folder above, elsewhere: in none
    assert inner_first(str(tmp_path / "home2" / "registry")) is None
    assert inner_first(str(tmp_path / "homeregistry")) is None
    assert inner_first(str(tmp_path)) is None
    assert inner_first(str(tmp_path / "work" / "a.py")) is None


def test_a_path_whose_folder_is_a_link_into_a_place_is_in_it(tmp_path: Path) -> None:
    home, registry = _tree(tmp_path)
    (tmp_path / "work" / "reg").symlink_to(registry)
    (tmp_path / "work" / "deep").symlink_to(registry / "platforms")
    place_of = evidence.places_of([(home, "H")])
    assert place_of(str(tmp_path / "work" / "reg" / "new.toml")) == "H"
    assert place_of(str(tmp_path / "work" / "deep" / "gamma.toml")) == "H"
    assert place_of(str(tmp_path / "work" / "reg.toml")) is None


def test_a_link_that_is_the_path_itself_names_the_folder_it_is(tmp_path: Path) -> None:
    # "work/reg" resolves only in its folder ("work"): the link itself is the registry under
    # another name, found by the folder's device and inode; the first place named wins there too
    home, registry = _tree(tmp_path)
    (tmp_path / "work" / "reg").symlink_to(registry)
    (home / "to-registry").symlink_to(registry)  # the home leads to the registry as well
    assert evidence.places_of([(registry, "R")])(str(tmp_path / "work" / "reg")) == "R"
    assert evidence.places_of([(home, "H"), (registry, "R")])(str(tmp_path / "work" / "reg")) == "H"
    assert evidence.places_of([(registry, "R"), (home, "H")])(str(tmp_path / "work" / "reg")) == "R"


def test_where_a_link_inside_a_place_leads_is_in_that_place(tmp_path: Path) -> None:
    home, registry = _tree(tmp_path)
    (tmp_path / "partners").mkdir()
    (registry / "platforms" / "beta.toml").symlink_to(tmp_path / "partners" / "beta.toml")
    place_of = evidence.places_of([(registry, "R")])
    assert place_of(str(tmp_path / "partners" / "beta.toml")) == "R"
    assert place_of(str(tmp_path / "partners" / "alpha.toml")) is None


def test_a_guarded_place_not_made_yet_holds_only_its_own_paths(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet"
    place_of = evidence.places_of([(missing, "M")])
    assert place_of(str(missing / "registry" / "x.toml")) == "M"
    assert place_of(str(tmp_path / "nowhere" / "x.toml")) is None  # no folder of it exists either
    assert place_of(str(tmp_path / "work")) is None


def test_the_folders_above_a_path_end_at_the_root() -> None:
    assert evidence._folders_above("/a/b") == ["/a/b", "/a", "/"]
    assert evidence._folders_above("/") == ["/"]


def test_a_folders_identity_is_its_device_and_inode(tmp_path: Path) -> None:
    info = os.stat(tmp_path)
    assert evidence._identity(str(tmp_path)) == (info.st_dev, info.st_ino)
    assert evidence._identity(str(tmp_path / "missing")) is None


def test_links_are_looked_for_to_the_depth_and_count_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    place = tmp_path / "place"
    (place / "one" / "two" / "three").mkdir(parents=True)
    for folder, name in ((place, "l0"), (place / "one", "l1"), (place / "one" / "two", "l2")):
        (folder / name).symlink_to(tmp_path / f"to-{name}")
    (place / "one" / "two" / "three" / "l3").symlink_to(tmp_path / "to-l3")
    real = os.path.realpath
    found = evidence._real_places(place)
    assert found[0] == real(place)
    assert sorted(found[1:]) == sorted(real(tmp_path / f"to-l{n}") for n in range(3))
    # a link that leads to a folder is not walked into
    (tmp_path / "to-l0").mkdir()
    (tmp_path / "to-l0" / "further").symlink_to(tmp_path / "beyond")
    assert real(tmp_path / "beyond") not in evidence._real_places(place)
    # the count bound: the place's own two entries are all that four looks allow below "one"
    flat = tmp_path / "flat"
    flat.mkdir()
    for n in range(3):
        (flat / f"l{n}").symlink_to(tmp_path / f"flat-{n}")
    monkeypatch.setattr(evidence, "_LINK_LOOKS", 2)
    assert len(evidence._real_places(flat)) == 3
    monkeypatch.setattr(evidence, "_LINK_LOOKS", 3)
    assert len(evidence._real_places(flat)) == 4


def test_a_place_not_made_yet_reached_through_a_link_to_its_folder_is_itself(tmp_path: Path) -> None:
    # the registry does not exist yet: no inode names it, only the path joined to its folder's
    home = tmp_path / "another-home"
    home.mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "link").symlink_to(home)
    place_of = evidence.places_of([(home / "registry", "R")])
    assert place_of(str(tmp_path / "work" / "link" / "registry")) == "R"
    assert place_of(str(tmp_path / "work" / "link" / "other")) is None


def test_a_place_is_a_prefix_only_at_a_folder_boundary_even_at_the_root() -> None:
    assert evidence._inside("/srv/home/a", "/srv/home/")
    assert evidence._inside("/srv/home/a", "/")
    assert evidence._inside("/srv/home", "/srv/home")
    assert not evidence._inside("/srv/homework", "/srv/home")


def test_the_count_bound_is_shared_by_every_folder_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # four looks: the place's two entries, then two of its folder's three links
    place = tmp_path / "place"
    (place / "sub").mkdir(parents=True)
    (place / "l0").symlink_to(tmp_path / "to-l0")
    for n in range(1, 4):
        (place / "sub" / f"s{n}").symlink_to(tmp_path / f"to-s{n}")
    monkeypatch.setattr(evidence, "_LINK_LOOKS", 4)
    assert len(evidence._real_places(place)) == 4


def test_a_folder_that_cannot_be_listed_is_passed_over_not_the_end_of_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = tmp_path / "place"
    for name in ("a", "b"):
        (place / name).mkdir(parents=True)
    (place / "b" / "link").symlink_to(tmp_path / "elsewhere")
    real_scandir = os.scandir

    def scandir(path: str) -> list[os.DirEntry[str]]:  # "a" first, and unreadable (as for another user)
        if os.path.basename(path) == "a":
            raise PermissionError(13, "Permission denied", path)
        return sorted(real_scandir(path), key=lambda entry: entry.name)

    monkeypatch.setattr(evidence.os, "scandir", scandir)
    assert os.path.realpath(tmp_path / "elsewhere") in evidence._real_places(place)
