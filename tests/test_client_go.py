"""The Go client (shared/clients/go) against the served functions: its own tests
(``go test -race``: the token vectors, the lease life, a stalled server, borrow, typed
errors, the wait queue served in join order, the policy's errors, and no goroutine left
running) run as a subprocess against tests/client_harness.py's server on real Redis and
PostgreSQL, and against tests/client_bad_server.py's behaviours (``SEATLEASE_BAD_URL``: a
Retry-After of an hour, an ended term, a suspension; and issue 48's: no seat without a
token signed by a pinned key, the refused grant's session released at once, a null
session, counts a renewal omits, a 404 that is not ``license_not_found``, a redirect, and
dripped answers); and the module built with no network, its LICENSE in the module's zip.
Its ``hold`` is checked with every client's in tests/test_client_holds.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from client_bad_server import bad_server
from http_support import post_json

from seatlease_client import SeatClient

REPO = Path(__file__).resolve().parent.parent
GO_DIR = REPO / "shared" / "clients" / "go"


def offline_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """No module proxy and no checksum database: the module must need neither."""
    return {**(base or os.environ), "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOSUMDB": "off"}


def go(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["go", *args],
        cwd=GO_DIR,
        env=offline_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def go_tool() -> str:
    found = shutil.which("go")
    assert found, "go is missing: make test installs it (apt-get install golang-go; README)"
    version = subprocess.run(
        [found, "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout
    major, minor = map(int, re.match(r"go(\d+)\.(\d+)", version).groups())  # type: ignore[union-attr]
    assert (major, minor) >= (1, 19), version
    return found


def test_the_go_client_passes_its_tests_with_race_detection(go_tool, client_functions):
    with bad_server() as bad_url:
        env = {**client_functions.env(), "SEATLEASE_BAD_URL": bad_url}
        result = go(["test", "-race", "-count=1", "-v", "./..."], env)
    output = result.stdout + result.stderr
    (GO_DIR / "build").mkdir(exist_ok=True)
    (GO_DIR / "build" / "go-test-output.log").write_text(output)  # the whole of it, to read after
    assert result.returncode == 0, output[-8000:]
    assert "--- SKIP" not in output, output  # the live tests ran against the client_functions
    passed = re.findall(r"--- PASS: (\S+)", output)
    assert len([name for name in passed if name.startswith("TestEveryVector/")]) >= 30
    for name in (
        "TestLeaseLifePastThreeLeasesAndARedisFlush",
        "TestAStalledServerAnswersTheRetryFromTheFirstRun",
        "TestBorrowLoadRefuseAnEditedFileReturnEarly",
        "TestTypedErrors",
        "TestA500IsASeatErrorNotRetried",
        "TestUnreachableURLAndCancelledContext",
        "TestCloseFromTheOnLostCallback",
        "TestA503WithRetryAfterIsRetriedNoSoonerWithTheSameRequestID",
        "TestWaitingGetsTheSeatReleasedMeanwhile",
        "TestAnOutageLongerThanTheLeaseMarksItLostThenRegains",
        "TestQueuedWaitersGetTheSeatInTheOrderTheyJoined",
        "TestWaitingInLineGivesUpAtTheTimeout",
        "TestTypedErrorsOfALicensePolicy",
        "TestRetryAfterNeverExceedsMaxBackoff",
        "TestARetryAfterOfAnHourNeverOutlastsTheMaximumBackoff",
        "TestAnEndedTermIsSaidOnceAndAskedAgainOnlyMinutesLater",
        "TestASuspendedLicenseKeepsItsHeldSeatAndRefusesANewOne",
        "TestASessionTheServerForgotIsKeptByItsLastToken",
        "TestATokenTheServerRefusesLosesTheSeatAsBefore",
        "TestASeatAnOperatorFreedIsLostAsRevokedWithoutItsToken",
        "TestSessionExpiredReasonIsTheAnswersReason",
        "TestARevokedSeatIsLostAsRevokedAndAcquiredAgain",
        # issue 48
        "TestNewRequiresPinnedKeysOrTheInsecureOptOut",
        "TestARefusedGrantIsNoSeatAndItsSessionIsReleasedAtOnce",
        "TestASessionNullGrantIsAnInvalidResponse",
        "TestSeatCountsKeepTheirLastValuesWhenARenewalOmitsThem",
        "TestA404IsLicenseNotFoundOnlyByItsCode",
        "TestARedirectIsNeverFollowed",
        "TestADrippedAnswerEndsAtTheTimeout",
        "TestADrippedHeartbeatEndsAtTheTimeout",
        "TestADrippedReleaseEndsAtTheReleaseTimeout",
        "TestARenewalNotBackByTheDeadlineLosesTheSeatThen",
        "TestAcquireSendsTheCallersRequestIDAndFingerprint",
        "TestBorrowSendsTheIdentityOfAnAcquireAndReleasesARefusedOne",
        "TestABorrowTakesTheIdentityOfAnAcquire",
        "TestTheVersionIsTheClientsVersionFile",
        "TestTheModuleShipsTheApacheLicense",
        # issue 48, the review
        "TestAFailedKeyFetchIsRetriedAndNeverReleasesTheSeat",
        "TestARefusedRenewalIsNotReleased",
        "TestAGrantsShapeIsCheckedAndNullCountsAreAbsent",
        "TestAReleasesKeyRefetchEndsWithinTheReleaseTimeout",
        "TestNewRefusesAPinnedKeyOfSmallOrder",
        # issue 50: the idle rule's client side (a recording server of its own)
        "TestHeartbeatsCarryIdleSecondsOnlyAfterATouchAndBusyWhileAScopeIsOpen",
        "TestAnIdleWarningIsCalledOnceAndATouchCancelsItAtOnce",
        "TestA410IdleIsLostAsIdleAndAskedForAgainOnlyOnceInUse",
        "TestTouchesOnEveryKeyWhileWarnedSendAHeartbeatASecondAtMost",
        "TestAnIdleLeaseIsWarnedReclaimedLostAsIdleAndTakenAgainOnATouch",
        "TestWhenNeededAnIdleLeaseKeepsItsSeatUntilAnotherClientAsks",
        "TestABusyLeaseIsNeverWarned",
    ):
        assert name in passed, output[-4000:]


def test_the_go_module_builds_without_network_and_needs_nothing_but_the_standard_library(
    go_tool, tmp_path
):
    env = {**os.environ, "GOPATH": str(tmp_path / "gopath"), "GOMODCACHE": str(tmp_path / "mod")}
    built = go(["build", "./..."], env)
    assert built.returncode == 0, built.stderr
    modules = go(["list", "-m", "all"], env)
    assert modules.stdout.split() == ["github.com/seatlease/seatlease/shared/clients/go"]
    imports = go(["list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "."], env)
    assert imports.stdout.split() == ["github.com/seatlease/seatlease/shared/clients/go"]
    assert not (GO_DIR / "go.sum").exists()


def test_the_go_module_zip_holds_the_license(tmp_path):
    """cmd/go makes a module's zip from its repository with ``git archive`` (the module's
    directory at a commit; export-ignore attributes apply): LICENSE is in it, at the
    module's root, the Apache-2.0 text."""
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", "shared/clients/go/LICENSE"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert tracked.returncode == 0, tracked.stderr
    archive = tmp_path / "module.zip"
    subprocess.run(
        ["git", "archive", "--format=zip", f"--output={archive}", "HEAD:shared/clients/go"],
        cwd=REPO, check=True,
    )  # fmt: skip
    import zipfile

    with zipfile.ZipFile(archive) as module:
        names = module.namelist()
        assert "LICENSE" in names and "go.mod" in names, names
        text = module.read("LICENSE").decode()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert text == (REPO / "LICENSE").read_text()


def test_a_seat_borrowed_by_the_python_client_loads_in_the_go_client(
    go_tool, client_functions, tmp_path
):
    post_json(
        f"{client_functions.url}/_test/license",
        {"license_id": "go-shared-borrow", "max_borrow_seconds": 86400},
    )
    with urllib.request.urlopen(f"{client_functions.url}/keys", timeout=10) as answer:
        pinned = [key["x"] for key in json.load(answer)["keys"]]
    python_client = SeatClient(
        client_functions.url, client_functions.api_key, pinned_keys=pinned, tenant_id="acme"
    )
    seat = python_client.borrow("go-shared-borrow", "laptop", 3600, path=tmp_path / "seat.json")
    # A product's module using the client from this checkout (replace: no network).
    product = tmp_path / "product"
    product.mkdir()
    (product / "go.mod").write_text(
        f"module product\n\ngo 1.19\n\nrequire {MODULE} v0.0.0\n\nreplace {MODULE} => {GO_DIR}\n"
    )
    (product / "main.go").write_text(LOAD_BORROWED)
    env = offline_env()
    loaded = subprocess.run(
        ["go", "run", ".", str(tmp_path / "seat.json"), ",".join(pinned)],
        cwd=product, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    answer = json.loads(loaded.stdout)
    assert answer["session"] == seat.session_id and 3500 < answer["left"] <= 3600


MODULE = "github.com/seatlease/seatlease/shared/clients/go"
LOAD_BORROWED = """package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

func main() {
	var pinned []any
	for _, x := range strings.Split(os.Args[2], ",") {
		pinned = append(pinned, x)
	}
	client, err := seatlease.New("http://127.0.0.1:1", "unused", seatlease.Options{
		PinnedKeys: pinned, TenantID: "acme",
	})
	if err != nil {
		panic(err)
	}
	seat, err := client.LoadBorrowed(context.Background(), os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	line, _ := json.Marshal(map[string]any{"session": seat.SessionID, "left": seat.SecondsLeft()})
	fmt.Println(string(line))
}
"""
