"""Mutation testing of the trust core, one module group at a time (tests/MUTATION.md).

    python tests/mutate.py                 # every group, one after the other
    python tests/mutate.py wire route      # some groups
    python tests/mutate.py --list          # the groups, their modules and their tests
    python tests/mutate.py --report        # the scores of the last runs again, without running
    python tests/mutate.py --survivors spool   # only the last run's survivors again (after new tests)
    python tests/mutate.py --in-process registry   # every mutant in one pytest process (minutes, not hours)

Each group's mutants run only against the test files that exercise that group (the per-group
``tests`` below), with a short per-test timeout: a mutant that breaks a wake-up then fails its
waiting test in seconds instead of holding it for the test's own long wait. mutmut (3) reads one
``[tool.mutmut]`` table, so each group runs in its own copy of the tree under ``.mutmut/<group>``
(git-ignored) with that table rewritten for the group; the tree is copied afresh each time, so a
new test is always run against the old survivors. At the end: killed/total per module, and the
survivors' names (``mutmut show NAME`` in ``.mutmut/<group>`` prints one as a diff).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import tomli_w

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutmut"


@dataclass(frozen=True)
class Group:
    modules: tuple[str, ...]  # files under agentmail/ to mutate
    tests: tuple[str, ...]  # test files under tests/ run against them (only those reaching the function)
    functions: tuple[str, ...] = ()  # mutant-name globs: only these functions (default: all of the modules)
    timeout: int = 60  # pytest-timeout per test, seconds
    whole: tuple[str, ...] = ()  # the test files of --whole, if not ``tests`` (the fast ones that kill)
    deselect: tuple[str, ...] = ()  # test ids never run (they cannot see a mutant, or fail under mutmut)


_METHOD = "\u01c1"  # mutmut's separator in a method's mutant names: x<sep>Class<sep>method


def named(module: str, *functions: str) -> tuple[str, ...]:
    """The mutant-name globs of some functions of ``agentmail.<module>`` (dotted, below agentmail):
    ``f`` names the function ``x_f``, ``Class.method`` a method (``*`` as in any glob)."""
    spelled = (_METHOD + f.replace(".", _METHOD) if "." in f else "_" + f for f in functions)
    return tuple(f"agentmail.{module}.x{name}__mutmut_*" for name in spelled)


_JUDGING = (
    "trust/test_trust_rules.py",
    "trust/test_trust_paths.py",
    "trust/test_authenticity.py",
    "trust/test_authenticity_exact.py",
)

# The MCP tests that start ``agentmail mcp`` as a process over stdio: under mutmut the SDK cannot
# hand the child a stderr (pytest's capture has closed it) and the child would not see the
# mutant anyway. The in-process tests (the SDK's client on the server object) cover the same.
_MCP_STDIO = tuple(
    f"test_mcp.py::{name}"
    for name in (
        "test_the_tool_list_is_small_and_complete",
        "test_lifecycle_over_mcp_with_the_same_guards",
        "test_identity_comes_from_the_working_directory_or_agent",
        "test_save_into_the_registry_through_the_sdk_client_is_refused",
        "test_save_writes_below_the_working_directory_over_stdio",
    )
)

GROUPS: dict[str, Group] = {
    "wire": Group(
        ("letter/wire.py", "letter/headers.py"),
        (
            "letter/test_wire.py",
            "letter/test_wire_exact.py",
            "letter/test_render_exact.py",  # the fast render path's exact bytes (test_render_fast is too slow traced)
            "letter/test_attachments.py",
            "stages/test_fanout.py",
            "letter/test_model.py",
            "letter/test_matter.py",
            "letter/test_mime.py",
            *_JUDGING,
        ),
    ),
    "signing": Group(
        ("trust/signing.py", "trust/dkim_lean.py"),
        (
            "trust/test_signing.py",
            "trust/test_signing_exact.py",
            "trust/test_signing_paths.py",
            "trust/test_signing_covered.py",
            "trust/test_signing_dns.py",
            "people/test_signed_as_pinned.py",
            *_JUDGING,
            "trust/test_dkim_lean.py",  # last: its differential tests are the slow ones
        ),
    ),
    # The lean DKIM path alone (dkim_lean, and signing's functions that call it), against the tests
    # that drive it: the part of the signing group a run of minutes can cover on a busy machine.
    "lean": Group(
        ("trust/signing.py", "trust/dkim_lean.py"),
        ("trust/test_signing_exact.py", "people/test_signed_as_pinned.py", "trust/test_dkim_lean.py"),
        functions=(
            "agentmail.trust.dkim_lean.*",
            *named("trust.signing", "sign", "sign_as", "_signing_key", "_lean_pass", "_verify_key"),
        ),
    ),
    "judging": Group(
        ("trust/auth_results.py", "trust/authenticity.py", "stages/guards.py", "protocol.py"),
        (
            "stages/test_guards.py",
            "stages/test_protocol.py",
            "stages/test_guards_exact.py",
            "letter/test_wire.py",
            "trust/test_signing_exact.py",
            "people/test_writing.py",  # a person's letter (authenticity._person), the aligned policy's Cc and List-Id
            "letter/test_attachments.py",  # authenticity._attachments_over_limits: no other file of the group reaches it
            *_JUDGING,
        ),
    ),
    # The routing stage: route.py, and the part of client.py that fetches, judges, routes and files
    # (sync and the methods it calls). The client's tests wait on wakes, hence the short timeout.
    # The routing stage: where a judged letter goes (file, quarantine — misaddressed, not-a-party,
    # a doubted bounce —, bounce, duplicate, skip). The facade's old routing methods moved to
    # client/receiver.py, whose paths the stage's own tests and the attack tests drive.
    "route": Group(
        ("stages/route.py",),
        (
            "stages/test_route_exact.py",
            "stages/test_route.py",
            "stages/test_addressed.py",
            "stages/test_parties.py",
            "stages/test_addressed_attacks.py",
            "stages/test_party_attacks.py",
            "stages/test_preemption.py",  # an answer waiting for its letter (awaiting-parent)
            "trust/test_bounce_trust.py",
            "trust/test_bounce_attacks.py",
            "trust/test_trust_rules.py",
        ),
        timeout=30,
    ),
    # The spool (SQLite rows + letter files) against its own in-process tests (every branch of its
    # modules, exact answers). test_migration/test_rebuild/test_recovery/test_crash prove the
    # same end to end through clients and SIGKILLed processes, at seconds per mutant: not run here.
    "spool": Group(
        (
            "spool/layout.py",
            "spool/views.py",
            "spool/depth.py",
            "spool/filing.py",
            "spool/store.py",
            "spool/recover.py",
            "spool/home_claims.py",
            "spool/server_claims.py",
            "spool/migrate.py",
        ),  # spool/db.py is the db group's
        ("spool/test_spool_exact.py", "spool/test_spool.py", "spool/test_spool_sides.py"),
        timeout=30,
    ),
    # The local post office: delivery, UIDs, fetch batches, the wait's wakes.
    "local": Group(("transport/local.py",), ("transport/test_local.py",), timeout=30),
    # Issue 23's modules: the functions that decide what a letter can make agentmail do (a whole
    # module did not fit in this session's time; the rest of each module is named in MUTATION.md).
    # Evidence: --attach confined, save, apply's hooks/series/symlink checks, names and limits.
    "evidence": Group(
        ("stages/evidence.py", "letter/attach.py"),
        (
            "letter/test_attachments.py",
            "stages/test_evidence_confinement.py",
            "stages/test_evidence_exact.py",
            "letter/test_attach_exact.py",
            "cli/test_mcp.py",
        ),
        functions=(
            *named(
                "stages.evidence",
                "_inside",
                "_open_confined",
                "from_file",
                "_is_a_secret",
                "_leaves",
                "_leading_out",
                "save",
                "_write_new",
                "_quiet_git",
                "_am_flags",
                "patches_of",
                "_try_in",
            ),
            *named("letter.attach", "safe_name", "unique_names", "limit_problem", "check"),
        ),
        timeout=30,
        whole=(
            "letter/test_attachments.py",
            "stages/test_evidence_confinement.py",
            "stages/test_evidence_exact.py",
            "letter/test_attach_exact.py",
        ),
        deselect=_MCP_STDIO,
    ),
    # The MCP server: exact schemas, save confined below the working directory.
    "mcp": Group(
        ("cli/mcp_server.py",),
        ("cli/test_mcp.py", "cli/test_parity.py"),
        functions=named(
            "cli.mcp_server",
            "_pattern",
            "_validator",
            "check_arguments",
            "_protected",
            "_below",
            "_save",
            "save_folder",
        ),
        timeout=60,
        deselect=_MCP_STDIO,
    ),
    # People's letters: the judging of a person's letter and the text a person would have seen.
    "people": Group(
        ("trust/human.py", "letter/readable.py", "letter/partly_signed.py"),
        (
            "people/test_people.py",
            "trust/test_signed_partly.py",
            "trust/test_partly_signed_exact.py",
            "people/test_people_exact.py",
            "letter/test_readable.py",
            "people/test_writing.py",
            "config/test_identity_headers.py",
            "trust/test_authenticity.py",
            "trust/test_trust_rules.py",
        ),
        timeout=30,
    ),
    # The registry: parsing hostile platform/person/bus files, identities.
    "registry": Group(
        ("config/registry.py", "config/settings.py"),
        (
            "config/test_registry.py",
            "config/test_settings_table.py",
            "config/test_registry_exact.py",
            "config/test_registry_toml.py",
            "config/test_bus_settings_hostile.py",
            "letter/test_values.py",
            "config/test_identity.py",
            "config/test_identity_headers.py",
        ),
        timeout=30,
        whole=(
            "config/test_registry_exact.py",
            "config/test_registry.py",
            "config/test_bus_settings_hostile.py",
            "config/test_settings_table.py",
        ),
    ),
    # Issue 37's new boundaries: the one frame shown text passes, and the one table of bounds.
    "frame": Group(
        ("frame.py", "bounds.py"),
        (
            "letter/test_bounds_exact.py",
            "cli/test_shown_frame.py",
            "cli/test_shown_attacks.py",
            "letter/test_bounds.py",
        ),
        timeout=30,
    ),
    # Issue 37: the functions of authenticity DESIGN §10 names — the signed recipients a letter is
    # addressed to, and the bounce believed only from the bus's own mail system (_vouched_recipients,
    # _platform_signed, _within) — against their tests (the rest of the module is the judging group's).
    "addressed": Group(
        ("trust/authenticity.py",),
        (  # the fast files that kill first (-x): the bounce paths, the exact rules, then the end-to-end ones
            "trust/test_bounce_trust.py",
            "trust/test_bounce_attacks.py",
            "trust/test_authenticity_exact.py",
            "trust/test_trust_rules.py",
            "trust/test_authenticity.py",
            "trust/test_trust_paths.py",
            "people/test_writing.py",
            "stages/test_addressed.py",
        ),
        functions=named(
            "trust.authenticity",
            "addressed",
            "_vouched_recipients",
            "judge",
            "_speaks_for",
            "_platform_signed",
            "_within",
        ),
        timeout=60,
    ),
    # Issue 37: who may change the registry and the home (apply's guarded places, an exposed home).
    "anchors": Group(
        ("admin/exposure.py", "config/bound.py"),
        (
            "config/test_bound_exact.py",
            "admin/test_home_exposure.py",
            "admin/test_home_exposure_attacks.py",
            "people/test_approval_attacks.py",
        ),
        timeout=60,
    ),
    # Issue 37, run 11: a received letter's attachments over the registry's limits (judged before
    # its signature is believed), which only letter/test_attachments.py reaches.
    "limits": Group(
        ("trust/authenticity.py",),
        ("trust/test_limits_exact.py", "letter/test_attachments.py", *_JUDGING),
        functions=named("trust.authenticity", "_attachments_over_limits"),
        timeout=60,
        # in one process the MCP save finds the test's folder on sys.path (the loop's own entry) and refuses it
        deselect=("letter/test_attachments.py::test_the_mcp_save_tool_writes_and_show_lists_metadata_only",),
    ),
    # Issue 37, run 11: the home's exposure alone, against real work trees (the anchors group's
    # approval attacks reach it only through an honest home and cost a minute a survivor).
    "exposure": Group(
        ("admin/exposure.py",),
        ("admin/test_exposure_exact.py", "admin/test_home_exposure.py", "admin/test_home_exposure_attacks.py"),
        timeout=60,
    ),
    # Issue 37, run 11: the credential forms and the one refusal of a leaving letter (DESIGN §10),
    # not the hold rules or the opener advice of the same module.
    "credentials": Group(
        ("stages/guards.py",),
        (
            "stages/test_credentials_exact.py",
            "stages/test_guards_exact.py",
            "stages/test_guards.py",
            "stages/test_secrets.py",
            "stages/test_secrets_attacks.py",
        ),
        functions=named(
            "stages.guards",
            "refusal",
            "plain",
            "credential_in",
            "_may_match",
            "any_credential",
            "_texts_of",
            "body_refusal",
            "subject_refusal",
            "attachment_refusal",
        ),
        timeout=60,
        # over MCP's stdio: the child's stderr is the first run's capture, closed in the next run
        deselect=(
            "stages/test_secrets.py::test_the_subject_is_refused_over_mcp",
            "stages/test_secrets_attacks.py::test_a_secret_in_the_ref_is_refused_over_mcp",
        ),
    ),
    # Issue 37, run 11: which guarded place a path lies in (apply's and the MCP save's one question).
    "places": Group(
        ("stages/evidence.py",),
        ("stages/test_places_exact.py", "stages/test_apply_anchor_attacks.py", "stages/test_apply_trust_anchors.py"),
        functions=named("stages.evidence", "places_of", "_real_places", "_identity", "_folders_above", "_inside"),
        timeout=60,
    ),
    # Issue 37, run 11: the registry's claims on its own folder, a retiring key, a key's identity.
    "claims": Group(
        ("config/registry.py",),
        (
            "config/test_registry_claims_exact.py",
            "config/test_registry_claims.py",
            "config/test_registry_exact.py",
            "config/test_registry_key_spellings.py",
        ),
        functions=named(
            "config.registry",
            "check_claims",
            "parse_previous",
            "key_identity",
            "_tlv",
            "_rsa_numbers",
            "_rsa_public_key",
        ),
        timeout=30,
    ),
    # Issue 37 (run 12): a person approves exactly what leaves, and a control that guards against
    # the agent needs an approver: the enforcing functions DESIGN §10 names (and the digest and the
    # recipient/attachment lines the announcement is made of).
    "approval": Group(
        ("client/holds.py", "client/consent.py"),
        (
            "people/test_consent_exact.py",
            "people/test_holds_exact.py",
            "people/test_approval_bound.py",
            "people/test_approval_by_mail.py",
            "people/test_approval_guard.py",
            "people/test_approval_attacks.py",
            "people/test_approving.py",
            "people/test_approval_writer.py",
        ),
        functions=(
            *named("client.holds", "Holds.bound", "Holds.release", "Holds._decide"),
            *named("client.consent", "Consent.ask"),
        ),
        timeout=60,
    ),
    # The announcement's words and the first key's place (people/approval.py), pure functions first.
    "announce": Group(
        ("people/approval.py",),
        (
            "people/test_approval_exact.py",
            "people/test_approval_bound.py",
            "people/test_approval_attacks.py",
            "people/test_approval_by_mail.py",
            "people/test_approval_guard.py",
        ),
        functions=named(
            "people.approval", "announcement", "_listed", "digest_of", "commits_of", "may_pin_first", "_target"
        ),
        timeout=60,
    ),
    # Issue 37 (run 12): the ledger a rebuild restores from (every function of the module).
    "ledger": Group(
        ("spool/ledger.py",),
        (
            "spool/test_ledger_exact.py",
            "spool/test_rebuild_attacks.py",
            "spool/test_waiting_exact.py",
            "spool/test_rebuild.py",
            "spool/test_spool.py",
        ),
        timeout=60,
    ),
    # Issue 37 (run 12): MCP lists paged with a total, every item bounded.
    "paging": Group(
        ("cli/mcp_server.py",),
        ("cli/test_mcp_paging_exact.py", "cli/test_mcp.py", "cli/test_shown_frame.py", "cli/test_shown_attacks.py"),
        functions=named("cli.mcp_server", "_bounded", "_page", "_offset", "_after", "_limit"),
        timeout=60,
        deselect=_MCP_STDIO,
    ),
    # Issue 37 (run 12): a proof verifies only against the keys in force, anchored to the registry.
    "proof": Group(
        ("archive/proof.py",),
        ("archive/test_proof_exact.py", "archive/test_attacks.py", "archive/test_proof.py"),
        functions=named(  # verify and what it calls (build, the export side, is not a check)
            "archive.proof",
            "verify",
            "load",
            "_field",
            "_platform",
            "_where",
            "_anchored",
            "_check",
            "_when",
            "Anchor.*",
        ),
        timeout=60,
    ),
    # Issue 37 (run 13): the spool's SQLite file — its opening, its errors said as one line, the
    # transactions and their durability, the ledger written after COMMIT.
    "db": Group(
        ("spool/db.py",),
        (
            "spool/test_db_exact.py",
            "spool/test_spool.py",
            "spool/test_openers.py",
            "spool/test_filing_power_cut.py",
            "spool/test_spool_sides.py",
            "spool/test_spool_lost.py",  # last: its children cost seconds each
        ),
        timeout=60,
    ),
    # Issue 37 (run 13): the one door for letters to people, and the queued records it reads back.
    "to_people": Group(
        ("client/to_people.py",),
        (
            "client/test_to_people_exact.py",
            "people/test_to_people.py",
            "people/test_to_people_attacks.py",
            "people/test_escalation.py",
            "people/test_announce_bounds.py",
            "people/test_digest.py",
        ),
        timeout=60,
    ),
    # Issue 37 (run 15): a thread bound to its opener's Message-ID (no other letter opens or
    # preempts it): the routing of a non-opener, the facts' opener-due, the bound id itself.
    "bound": Group(
        ("stages/route.py", "stages/facts.py", "model.py"),
        (
            "stages/test_bound_exact.py",
            "stages/test_bound_threads.py",
            "stages/test_bound_thread_attacks.py",
            "stages/test_preemption.py",
            "stages/test_waiting_attacks.py",
            "letter/test_model.py",
        ),
        functions=(
            *named("stages.route", "route", "_not_its_opener", "_awaiting_opener"),
            *named("stages.facts", "gather"),
            *named("model", "bound_thread_id", "is_bound", "bound_to"),
        ),
        timeout=60,
    ),
    # Issue 37 (run 15): a stalled thread escalated once across machines (the claim on the post office).
    "escalate": Group(
        ("client/to_people.py", "people/escalation.py"),
        (
            "people/test_escalation_exact.py",
            "people/test_escalation_machines_attack.py",  # it kills most, in-process
            "people/test_escalation_claims_attacks.py",
            "people/test_escalation.py",
            "client/test_to_people_exact.py",
        ),
        functions=(
            *named("client.to_people", "ToPeople.escalate", "ToPeople._still_ours"),
            *named("people.escalation", "claim", "settle", "ask_again", "next_ask"),
        ),
        timeout=60,
    ),
    # Issue 37 (run 15): a change of bus.toml that loosens a guard asked of the approvers first.
    "loosening": Group(
        ("admin/bus.py", "client/consent.py"),
        (
            "config/test_change_setting_exact.py",
            "people/test_consent_exact.py",
            "people/test_loosening_asked.py",
            "people/test_loosening_attacks.py",
            "config/test_loosening.py",
        ),
        functions=(*named("admin.bus", "change_setting", "_first_approved"), *named("client.consent", "Consent.ask")),
        timeout=60,
    ),
    # Issue 37 (run 15): the post office's claim marks, read plainly from a hostile .claims folder.
    "claim_marks": Group(
        ("transport/claim_marks.py",),
        (
            "transport/test_claim_marks_exact.py",
            "transport/test_claim_attacks.py",
            "transport/test_claims_dir_attacks.py",
            "transport/test_claims_upkeep.py",
        ),
        functions=named("transport.claim_marks", "Claims.claim", "Claims._read"),
        timeout=60,
    ),
    # Issue 39 (run 14): the sent letter's move made durable in one commit with its flush.
    "durable": Group(
        ("spool/filing.py",),
        (
            "stages/test_send_durability.py",
            "spool/test_spool_sides.py",
            "spool/test_filing_power_cut.py",
            "spool/test_spool.py",
            "spool/test_rebuild.py",
            "spool/test_openers.py",
        ),
        functions=named("spool.filing", "SpoolWriter.make_durable", "SpoolWriter._move", "SpoolWriter.move"),
        timeout=60,
    ),
    # Issue 37 (run 16): the enforcing functions of DESIGN §10 no group had mutated.
    "text": Group(
        ("text.py",), ("letter/test_text.py", "letter/test_shown_text.py", "letter/test_text_exact.py"), timeout=60
    ),
    "read_plain": Group(
        ("_fs.py",),
        ("transport/test_postoffice_entries.py", "transport/test_primitives.py"),
        functions=named("_fs", "read_plain"),
        timeout=60,
    ),
    "depth_for": Group(
        ("spool/depth.py",),
        ("spool/test_spool.py", "spool/test_openers.py", "spool/test_rebuild.py"),
        functions=named("spool.depth", "depth_for"),
        timeout=60,
    ),
    "watch_key": Group(("cli/watch.py",), ("cli/test_watch.py",), functions=named("cli.watch", "_key"), timeout=60),
    "demo_home": Group(
        ("admin/demo.py",),
        ("admin/test_demo_home.py", "admin/test_demo_home_attacks.py"),
        functions=named("admin.demo", "_refuse_used"),
        timeout=120,
    ),
    # Issue 37 (run 17): an answer held for its letter is judged again and filed exactly once
    # (``settle`` and ``_ready``, which only it calls; ``_again`` is ``recheck``'s as well).
    "recheck": Group(
        ("client/recheck.py",),
        (
            "client/test_settle_exact.py",
            "stages/test_preemption.py",
            "stages/test_waiting_attacks.py",
            "stages/test_bound_threads.py",
            "stages/test_bound_thread_attacks.py",
        ),
        functions=named("client.recheck", "settle", "_ready"),
        timeout=60,
    ),
    # The one writer's other primitives: a new file never over an existing one, a file replaced
    # whole or not at all, a link only of the very same file, the mailbox lock, the fsyncs.
    "fs": Group(
        ("_fs.py",),
        ("transport/test_fs_exact.py", "transport/test_primitives.py"),
        functions=named(
            "_fs",
            "fsync_dir",
            "libc",
            "sync_filesystem",
            "_write",
            "write_all",
            "write_new",
            "link_same",
            "_kind",
            "is_same",
            "fsync_file",
            "write_atomic",
            "locked",
        ),
        timeout=60,
    ),
    # The one place an arrived letter is held to bounds.py (Malformed too-large naming the bound).
    "read_bounded": Group(
        ("letter/wire.py",),
        (
            "letter/test_read_bounded_exact.py",
            "letter/test_bounds_exact.py",
            "letter/test_bounds.py",
            "people/test_person_bounds.py",
        ),
        functions=named("letter.wire", "read_bounded", "_check_bounds"),
        timeout=60,
    ),
    # Issue 37 (run 17): a page for people runs nothing a letter wrote (autoescape, the CSP, the
    # characters XML forbids shown, a quarantined letter never shown as verified, no symlinked folder).
    "pages": Group(
        ("archive/pages.py", "archive/gather.py", "archive/site.py"),
        ("archive/test_pages_exact.py", "archive/test_site.py", "archive/test_attacks.py", "archive/test_serve.py"),
        functions=(
            *named("archive.pages", "_env", "_printable", "csp"),
            *named("archive.gather", "_auth", "thread_view"),
            *named("archive.site", "_write"),
        ),
        timeout=60,
    ),
    # Issue 37 (run 17): one reply per letter, the claims keyed by the answered letter's Message-ID
    # and verified sender (the home's claims table, the server's claims noted on the reply).
    "claims_spool": Group(
        ("spool/layout.py", "spool/home_claims.py", "spool/server_claims.py"),
        (
            "spool/test_claims_spool_exact.py",
            "spool/test_spool.py",
            "spool/test_spool_sides.py",
            "transport/test_claim_attacks.py",
            "transport/test_claims_upkeep.py",
            "stages/test_outbound.py",
            "client/test_client_races.py",
            "client/test_speed_attacks.py",
            "client/test_recovery.py",
            "people/test_escalation_exact.py",
        ),
        functions=(
            *named("spool.layout", "reply_key", "opener_row", "_key", "_loads"),
            "agentmail.spool.home_claims.*",
            "agentmail.spool.server_claims.*",
        ),
        timeout=60,
    ),
    # Issue 37 (run 17): a rebuild restores what was (the rows, their notes, their filing order).
    "recover": Group(
        ("spool/recover.py",),
        (
            "spool/test_recover_exact.py",
            "spool/test_rebuild_attacks.py",
            "spool/test_rebuild.py",
            "spool/test_spool.py",
            "spool/test_rebuild_restores.py",
        ),
        timeout=60,
    ),
    # Rebuild restores what was: states, notes, filing order and reply claims come back.
    "rebuild": Group(
        ("client/receiver.py",),
        (
            "spool/test_rebuild_exact.py",
            "spool/test_rebuild.py",
            "spool/test_rebuild_attacks.py",
            "spool/test_rebuild_restores.py",
        ),
        functions=named("client.receiver", "Receiver.rebuild", "Receiver._settle"),
        timeout=60,
    ),
    # The send-side half of "bounded work and mail per letter": compose applies bounds.py (exit 2).
    "compose_bounds": Group(
        ("stages/compose.py",),
        (
            "stages/test_compose_bounds_exact.py",
            "letter/test_shown_text.py",
            "letter/test_bounds_exact.py",
            "letter/test_attachments.py",
        ),
        functions=named("stages.compose", "compose", "send_limit"),
        timeout=60,
    ),
    # ``quarantine recheck`` and ``drop``: the letters named, judged again, each outcome carried out once.
    "recheck_cmd": Group(
        ("client/recheck.py",),
        (
            "client/test_recheck_exact.py",
            "client/test_quarantine_recheck.py",
            "trust/test_rotation.py",
            "stages/test_preemption.py",
        ),
        functions=named("client.recheck", "_again", "recheck", "chosen"),
        timeout=60,
    ),
}
# Not mutated this session: transport/inotify.py and the rest of client.py (they wait on wakes).


def _config(group: Group) -> dict[str, object]:
    return {
        "source_paths": ["agentmail"],
        "only_mutate": [f"agentmail/{m}" for m in group.modules],
        "also_copy": ["tests", "pyproject.toml"],
        "pytest_add_cli_args": [
            *("-p", "no:cacheprovider", "-n", "0", "--no-cov", "-o", f"timeout={group.timeout}"),
            *(f"--deselect=tests/{test}" for test in group.deselect),
        ],
        "pytest_add_cli_args_test_selection": [f"tests/{t}" for t in group.tests if (ROOT / "tests" / t).exists()],
        "timeout_multiplier": 5.0,
        "use_git_change_detection": False,
    }


def _prepare(name: str, group: Group) -> Path:
    where = WORK / name
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".mypy_cache", ".hypothesis")
    shutil.copytree(ROOT / "agentmail", where / "agentmail", ignore=ignore)
    shutil.copytree(ROOT / "tests", where / "tests", ignore=ignore)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project["tool"]["mutmut"] = _config(group)
    (where / "pyproject.toml").write_text(tomli_w.dumps(project))
    return where


_RESULT = re.compile(r"^\s*(agentmail\.[\w.]+?)\.(x\S+): (.+)$")


def run(name: str, group: Group, children: int | None, only: list[str] | None = None) -> None:
    """Mutate one group in a fresh copy of the tree (``only``: just these mutants)."""
    where = _prepare(name, group)
    names = only if only is not None else list(group.functions)
    command = ["mutmut", "run", *(["--max-children", str(children)] if children else []), *names]
    print(f"== {name}: {' '.join(command)}  (in {where})", flush=True)
    subprocess.run(command, cwd=where, check=False)


KILLED = {"killed", "timeout"}


def _saved(name: str) -> Path:
    return WORK / f"{name}.json"


def collect(name: str) -> dict[str, dict[str, str]]:
    """A group's mutants' statuses per module (``agentmail.letter.wire`` -> name -> status): the merged
    result of its last run and any ``--survivors`` re-runs after it."""
    where = WORK / name
    if _saved(name).exists():
        saved: dict[str, dict[str, str]] = json.loads(_saved(name).read_text())
        return saved
    if not (where / "mutants").is_dir():
        return {}
    listing = subprocess.run(["mutmut", "results", "--all", "true"], cwd=where, capture_output=True, text=True)
    statuses: dict[str, dict[str, str]] = {}
    for line in listing.stdout.splitlines():
        found = _RESULT.match(line)
        if found:
            statuses.setdefault(found[1], {})[f"{found[1]}.{found[2]}"] = found[3]
    return statuses


def recheck(name: str, group: Group, children: int | None) -> None:
    """Run only the last run's survivors again, in a fresh copy with today's tests; the killed
    ones keep their status (a test added since cannot un-kill a mutant)."""
    before = collect(name)
    survivors = [m for statuses in before.values() for m, s in statuses.items() if s not in KILLED]
    if not survivors:
        print(f"== {name}: no survivors to re-check")
        return
    _saved(name).unlink(missing_ok=True)
    run(name, group, children, only=survivors)
    after = collect(name)
    for module, statuses in after.items():
        for mutant, status in statuses.items():
            if mutant in before.get(module, {}) and status != "not checked":
                before[module][mutant] = status
    _saved(name).write_text(json.dumps(before, indent=1, sort_keys=True))


def _whole_run(where: Path, group: Group, mutant: str) -> str:
    """One mutant against every test of the group's files, in its copy's ``mutants`` tree."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", *_config(group)["pytest_add_cli_args"]]  # type: ignore[misc]
    command += [f"tests/{t}" for t in group.whole or group.tests if (ROOT / "tests" / t).exists()]
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant}
    try:
        proc = subprocess.run(command, cwd=where / "mutants", env=env, capture_output=True, timeout=30 * 60)
    except subprocess.TimeoutExpired:
        return "timeout"
    return {0: "survived", 1: "killed"}.get(proc.returncode, f"error {proc.returncode}")


def whole(name: str, group: Group, children: int | None) -> None:
    """Run each of the last run's survivors against the group's whole test files, not only the
    tests mutmut saw reach the function: a test that reaches it only through a child process
    (the CLI, a git hook) is not in mutmut's list, yet kills the mutant, because the child
    inherits MUTANT_UNDER_TEST and imports the copy's mutated tree."""
    before = collect(name)
    survivors = [m for statuses in before.values() for m, s in statuses.items() if s not in KILLED | {"not checked"}]
    where = WORK / name
    print(f"== {name}: {len(survivors)} survivors against the whole of {', '.join(group.tests)}", flush=True)
    with ThreadPoolExecutor(max_workers=children or 2) as pool:
        for mutant, status in zip(survivors, pool.map(lambda m: _whole_run(where, group, m), survivors), strict=True):
            print(f"  {status}: {mutant}", flush=True)
            module = mutant.split(".x", 1)[0]
            before[module][mutant] = "killed" if status == "killed" else before[module][mutant]
    _saved(name).write_text(json.dumps(before, indent=1, sort_keys=True))


def generate(name: str, group: Group) -> Path:
    """A fresh copy of the tree with the group's mutants written into its ``mutants`` tree, and no
    test run: mutmut's generation steps alone (``mutmut run`` would first trace every test)."""
    where = _prepare(name, group)
    steps = (
        "from pathlib import Path; import mutmut.__main__ as m; m.set_mutant_under_test('mutant_generation'); "
        "Path('mutants').mkdir(exist_ok=True); m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths(); "
        "m.create_mutants(1)"
    )
    subprocess.run([sys.executable, "-c", steps], cwd=where, check=True, capture_output=True)
    return where


def _mutant_names(where: Path, group: Group) -> dict[str, list[str]]:
    """Each mutated module's mutant names (``agentmail.config.registry`` -> [``agentmail.config.registry.x_load__mutmut_1``, ...])."""
    found: dict[str, list[str]] = {}
    for module in group.modules:
        dotted = "agentmail." + module.removesuffix(".py").replace("/", ".")
        text = (where / "mutants" / "agentmail" / module).read_text()
        names = sorted(
            set(re.findall(r"\['(x\S+?__mutmut_\d+)'\] = ", text)),
            key=lambda n: (n.rsplit("_", 1)[0], int(n.rsplit("_", 1)[1])),
        )
        found[dotted] = [f"{dotted}.{n}" for n in names]
    return found


# The child of --in-process: one pytest process, each mutant in turn (the trampolines read
# MUTANT_UNDER_TEST at every call), -x and no tracebacks: a killed mutant costs its first failure.
_LOOP = """
import contextlib, io, json, os, sys
sys.path.insert(0, os.getcwd())
import pytest
names, args, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
os.environ["AGENTMAIL_MUTATION"] = "1"  # tests/conftest.py: failures not shrunk
with open(out, "a") as log:
    for name in names:
        os.environ["MUTANT_UNDER_TEST"] = name
        with contextlib.redirect_stdout(io.StringIO()):
            code = int(pytest.main(args))
        log.write(json.dumps([name, {0: "survived", 1: "killed", 5: "no tests"}.get(code, f"error {code}")]) + "\\n")
        log.flush()
"""
CONTROL = "agentmail.no_such_module.x_control__mutmut_1"  # changes nothing: must survive, first and last


def in_process(
    name: str,
    group: Group,
    files: list[str] | None,
    survivors_only: bool,
    chunk: int = 150,
    only: tuple[str, ...] = (),
) -> None:
    """Every mutant of the group (or, after new tests for the same code, the last result's
    survivors) against ``files`` (default: the group's whole or test files), in pytest processes
    of ``chunk`` mutants each (one process's memory grows with each ``pytest.main``) in a fresh
    copy: about a second a mutant that survives, a fraction of one that is killed. A control
    mutant (a name no function has) runs first and last in each process and must survive. The
    result is written to ``.mutmut/GROUP.json``, which ``--report`` reads."""
    before = collect(name) if survivors_only else {}
    where = generate(name, group)
    statuses = {m: {n: "not checked" for n in ns} for m, ns in _mutant_names(where, group).items()}
    for module, known in before.items():  # only names the code still has: a changed function's are new
        statuses.setdefault(module, {}).update((n, s) for n, s in known.items() if n in statuses.get(module, {}))
    wanted = [n for known in statuses.values() for n, s in known.items() if s not in KILLED]
    todo = [n for n in wanted if not group.functions or any(fnmatch.fnmatchcase(n, f) for f in group.functions)]
    todo = [n for n in todo if not only or any(fnmatch.fnmatchcase(n, f) for f in only)]
    tests = [f"tests/{t}" for t in (files or group.whole or group.tests) if (ROOT / "tests" / t).exists()]
    args = ["-x", "-q", "--tb=no", "-p", "no:randomly", *_config(group)["pytest_add_cli_args"], *tests]  # type: ignore[misc]
    out = where / "in-process.jsonl"
    print(f"== {name}: {len(todo)} mutants, {chunk} a process, against {', '.join(tests)}", flush=True)
    for start in range(0, len(todo), chunk):
        names = [CONTROL, *todo[start : start + chunk], CONTROL]
        subprocess.run([sys.executable, "-c", _LOOP, json.dumps(names), json.dumps(args), str(out)],
                       cwd=where / "mutants", check=True)  # fmt: skip
        print(f"   {min(start + chunk, len(todo))} of {len(todo)}", flush=True)
    results = [json.loads(line) for line in out.read_text().splitlines()]
    controls = {s for n, s in results if n == CONTROL}
    if controls != {"survived"}:
        raise SystemExit(f"{name}: the control mutant did not survive ({controls}): the results mean nothing")
    for mutant, status in results:
        if mutant != CONTROL:
            statuses[mutant.split(".x", 1)[0]][mutant] = status
    _saved(name).write_text(json.dumps(statuses, indent=1, sort_keys=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("groups", nargs="*", help=f"some of {', '.join(GROUPS)} (default: all)")
    parser.add_argument("--list", action="store_true", help="print the groups and exit")
    parser.add_argument("--report", action="store_true", help="only report the groups' last runs")
    parser.add_argument("--survivors", action="store_true", help="re-run only the last run's survivors")
    parser.add_argument("--whole", action="store_true", help="the last run's survivors against the whole test files")
    parser.add_argument("--in-process", action="store_true", help="every mutant in one pytest process (no mutmut run)")
    parser.add_argument("--files", nargs="+", default=None, help="with --in-process: these test files instead")
    parser.add_argument(
        "--only", nargs="+", default=(), help="with --in-process --survivors: only the mutants of these name globs"
    )
    parser.add_argument("--max-children", type=int, default=None, help="parallel mutants (mutmut's default: CPUs)")
    args = parser.parse_args()
    if args.list:
        for name, group in GROUPS.items():
            print(f"{name}: {', '.join(group.modules)} <- {', '.join(group.tests)} (timeout {group.timeout}s)")
            if group.functions:
                print(f"    only: {', '.join(group.functions)}")
        return 0
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"no such group: {', '.join(unknown)} (groups: {', '.join(GROUPS)})")
    table: dict[str, dict[str, str]] = {}
    for name in args.groups or list(GROUPS):
        if args.in_process:
            in_process(name, GROUPS[name], args.files, args.survivors, only=tuple(args.only))
        elif args.whole:
            whole(name, GROUPS[name], args.max_children)
        elif args.survivors:
            recheck(name, GROUPS[name], args.max_children)
        elif not args.report:
            _saved(name).unlink(missing_ok=True)
            run(name, GROUPS[name], args.max_children)
        table.update(collect(name))
    print("\nmodule                      mutants  killed  (timeout)  survived  score")
    for module, statuses in sorted(table.items()):
        values = list(statuses.values())
        killed = sum(s in KILLED for s in values)
        timeouts = values.count("timeout")
        print(
            f"{module:<26} {len(values):8} {killed:7} {timeouts:10} {len(values) - killed:9}"
            f"  {100 * killed / max(len(values), 1):5.1f} %"
        )
    for _module, statuses in sorted(table.items()):
        for mutant, status in sorted(statuses.items()):
            if status not in KILLED:
                print(f"{status}: {mutant}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
