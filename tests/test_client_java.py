"""The Java client (shared/clients/java) as a vendor builds it: ``mvn -o package`` with the
plugins and JUnit 5 of Debian's /usr/share/maven-repo (offline) builds the jar and runs its
JUnit 5 tests. The documented command must pass from a clean copy of the folder with no
server and no ``SEATLEASE_*`` variable (the tests that need nothing; issue 48); with the
profile ``live`` (``-Plive``) it also runs the tests tagged ``live`` against what this file
serves: the functions on real Redis and PostgreSQL
(tests/client_harness.py: ``SEATLEASE_TEST_URL``, ``SEATLEASE_TEST_API_KEY``), the fake
server of bad answers and behaviours (tests/client_bad_server.py: ``SEATLEASE_BAD_URL``),
and a seat borrowed by the Python client for the Java client to load, while the Java client
saves one for the Python client to load here afterwards. Surefire's reports must show every
test run (the live classes included), none failed, none skipped; the jar carries the
license text (META-INF/LICENSE) and the one version of all five clients. ``build.sh``
(javac alone, used by ``./hold`` and ``make lint``) must build the same sources."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import pytest
from client_bad_server import bad_server
from http_support import post_json

from seatlease_client import SeatClient

REPO = Path(__file__).resolve().parent.parent
JAVA_DIR = REPO / "shared" / "clients" / "java"
VERSION = (REPO / "shared" / "clients" / "VERSION").read_text().strip()
# The documented build (shared/clients/java/README.md, docs/client.md)
DOCUMENTED = ["mvn", "-o", "-B", "-Dmaven.repo.local=/usr/share/maven-repo", "package"]
MAVEN_REPO = Path("/usr/share/maven-repo")
GSON = Path("/usr/share/java/gson.jar")
PLUGINS = [
    "org/apache/maven/plugins/maven-resources-plugin/3.3.0",
    "org/apache/maven/plugins/maven-compiler-plugin/3.10.1",
    "org/apache/maven/plugins/maven-surefire-plugin/2.22.3",
    "org/apache/maven/plugins/maven-jar-plugin/3.3.0",
    "org/apache/maven/plugins/maven-install-plugin/3.1.0",
    "org/junit/jupiter/junit-jupiter-engine/5.9.2",
    "com/google/code/gson/gson/2.10",
]

# Every test the Java suite must have run (class, method).
TESTS = {
    "VectorTests": ["everyMachineFingerprint", "leewayByTheVerifiersClock", "pinnedKeyForms"],
    "TrustedAnswerTests": [
        "aClientIsVerifiedByDefault",
        "aGrantWithoutTheVendorsTokenIsNoSeatAndIsReleasedAtOnce",
        "a404ThatIsNotLicenseNotFoundIsAnHttpErrorNamingTheUrl",
        "aRedirectIsNotFollowedAndNamesItsLocation",
        "seatCountsKeepTheirLastKnownValuesWhenARenewalOmitsThem",
        "aGrantWithANullSessionIsAnInvalidResponse",
        "acquireAndBorrowSendTheCallersIdentity",
        "aSeatIsReleasedWhenTheJvmExitsOrIsTerminated",
        "theVersionIsTheOneOfAllClients",
        "aPinnedKeyOfSmallOrderIsRefusedAtBuild",
        "theShapeOfAGrantAndOfARenewal",
    ],
    "ApiTests": [
        "noGsonTypeInThePublicApi",
        "theClientIsImmutableOnceBuilt",
        "aClosedClientRefusesCalls",
        "optionsTakePlainJavaValues",
    ],
    "BadAnswerTests": [
        "weightsAreSentAndRead",
        "aDrippedAnswerEndsAtTheTimeout",
        "retryAfterIsCappedAtTheMaximumBackoff",
        "interruptingAPlainCallEndsIt",
    ],
    "LocalServerTests": [
        "httpUrlsUseHttp11WithoutAnUpgrade",
        "aLossTheTokenDoesNotRecoverIsLostAndRegained",
        "closeNeverWaitsPastTheReleaseTimeout",
        "aDrippedHeartbeatLosesTheLeaseByItsDeadline",
        "aSeatAnOperatorFreedIsLostAsRevokedWithoutItsToken",
    ],
    # issue 50: the idle rule's client side, against a scripted loopback server
    "IdleTests": [
        "heartbeatsCarryIdleSecondsOnlyAfterATouchAndBusyWhileAScopeIsOpen",
        "anIdleWarningIsCalledOnceAndATouchCancelsItAtOnce",
        "a410IdleIsLostAsIdleAndAskedForAgainOnlyOnceInUse",
        "touchesOnEveryKeyWhileWarnedSendAHeartbeatASecondAtMost",
        "answersCarryTheWarningAndTheSharedSessionsAndABadWarningIsRefused",
    ],
    "BehaviourTests": [
        "aDrippingHeartbeatLosesTheLeaseByItsDeadline",
        "aRegionsLossIsRecoveredByTheLeaseToken",
        "aSeatAnOperatorFreedIsLostAsRevokedWithoutItsToken",
        "anEndedTermIsLostOnceAndAskedForSlowly",
        "aSuspensionKeepsTheHeldSeat",
    ],
    "LiveTests": [
        "leaseLifePastThreeLeasesAndARevoke",
        "aStalledServerAnswersTheRetryFromTheFirstRun",
        "aRetryOfYourOwnWithTheSameRequestIdTakesOneSeat",
        "typedErrors",
        "a500IsAnHttpErrorNotRetried",
        "a503WithRetryAfterIsRetriedNoSoonerWithTheSameRequestId",
        "waitingGetsTheSeatReleasedMeanwhile",
        "anUnreachableUrlIsBackendUnavailable",
        "releaseFromTheOnLostCallback",
        "anOutageLongerThanTheLeaseMarksItLostThenRegains",
        "queuedWaitersGetTheSeatInTheOrderTheyJoined",
        "waitingInLineGivesUpAtTheTimeout",
        "typedErrorsOfALicensePolicy",
        "aFullQueueIsQueueFull",
        "aBorrowedSeatThroughAPlainAcquire",
        "aLicensesTermsAndAMachineBoundSeat",
        "entitlementsAndVersionAreAskedFor",
        "pinnedKeysFromTheDeploymentVerifyAndOthersAreRefused",
        "aWeightedLease",
        "aSuspendedLicenseIsLicenseSuspendedUntilItIsResumed",
        "closingTheClientReleasesItsSeats",
    ],
    # issue 50: the idle rule end to end
    "IdleLiveTests": [
        "anIdleLeaseIsWarnedReclaimedLostAsIdleAndTakenAgainOnATouch",
        "whenNeededAnIdleLeaseKeepsItsSeatUntilAnotherClientAsks",
        "aBusyLeaseIsNeverWarned",
    ],
    "CancelTests": [
        "cancellingEndsAWaitForAFullLicense",
        "cancellingEndsAWaitInLine",
        "cancellingAnAcquireInFlightGivesBackTheSeatItTook",
        "interruptingAWaitingThreadCancelsIt",
        "closingTheClientEndsItsWaits",
    ],
    "BorrowTests": [
        "borrowLoadRefuseAnEditedFileReturnEarly",
        "aSeatBorrowedByThePythonClientLoadsAndOneBorrowedHereIsSavedForIt",
    ],
    "BadServerTrustTests": [
        "theVendorsSignedGrantIsAVerifiedSeat",
        "aGrantWithoutTheVendorsTokenIsReleasedAtOnce",
        "aDrippedReleaseEndsByTheReleaseTimeout",
        "a404IsReadByItsCode",
        "aNullSessionIsAnInvalidResponse",
        "seatCountsKeepTheirLastKnownValues",
        "aRedirectIsNotFollowed",
        "aFailedKeyFetchIsRetriedAndNeverReleasesTheSeat",
        "aGrantsShapeIsCheckedAndNullCountsAreAbsent",
        "aReleasesKeyRefetchEndsByTheReleaseTimeout",
    ],
}
# The classes that need nothing (run by the documented command); the others are tagged live.
OFFLINE = {"VectorTests", "ApiTests", "LocalServerTests", "TrustedAnswerTests", "IdleTests"}


@pytest.fixture(scope="module")
def java_toolchain() -> None:
    for tool in ("javac", "java", "mvn"):
        assert shutil.which(tool), f"{tool} is missing: make test installs it (clients-tools)"
    version = subprocess.run(["javac", "-version"], capture_output=True, text=True, check=True)
    major = int(re.search(r"javac (\d+)", version.stdout + version.stderr).group(1))  # type: ignore[union-attr]
    assert major >= 17, version.stdout
    assert GSON.exists(), "gson is missing: make test installs libgoogle-gson-java"
    for plugin in PLUGINS:
        assert (MAVEN_REPO / plugin).is_dir(), f"{plugin} is missing: make test installs it"
    built = subprocess.run(
        ["./build.sh"], cwd=JAVA_DIR, capture_output=True, text=True, timeout=300, check=False
    )
    assert built.returncode == 0, built.stderr  # javac alone: ./hold and make lint


def deployment_keys(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/keys", timeout=10) as answer:
        return [key["x"] for key in json.load(answer)["keys"]]


def surefire_reports(folder: Path = JAVA_DIR) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The totals of surefire's XML reports, and each test class's test names."""
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    names: dict[str, list[str]] = {}
    for report in sorted((folder / "target" / "surefire-reports").glob("TEST-*.xml")):
        suite = ElementTree.parse(report).getroot()
        for field in totals:
            totals[field] += int(suite.get(field, "0"))
        for case in suite.iter("testcase"):
            kind = case.get("classname", "").rsplit(".", 1)[-1]
            # "method", "method{Path}" (a parameter), "method[3]" (the third dynamic test)
            name = re.sub(r"[{\[].*$", "", case.get("name", ""))
            names.setdefault(kind, []).append(name)
    return totals, names


def check_jar(folder: Path) -> None:
    """The jar: its module name, classes, the license text (Apache-2.0 section 4(a)) and
    the one version."""
    jar = folder / "target" / f"seatlease-client-{VERSION}.jar"
    assert jar.exists(), sorted(p.name for p in (folder / "target").iterdir())
    listing = subprocess.run(["unzip", "-l", str(jar)], capture_output=True, text=True, check=False)
    if listing.returncode == 0:  # unzip is optional: zipfile says the same below
        assert "META-INF/LICENSE" in listing.stdout, listing.stdout
    with zipfile.ZipFile(jar) as archive:
        manifest = archive.read("META-INF/MANIFEST.MF").decode()
        assert "Automatic-Module-Name: io.seatlease.client" in manifest, manifest
        assert "io/seatlease/client/SeatClient.class" in archive.namelist()
        license_text = archive.read("META-INF/LICENSE").decode()
        assert license_text == (REPO / "LICENSE").read_text()
        assert "Apache License" in license_text and "Version 2.0" in license_text
    assert f"<version>{VERSION}</version>" in (folder / "pom.xml").read_text()
    source = (folder / "src/main/java/io/seatlease/client/SeatClient.java").read_text()
    assert f'public static final String VERSION = "{VERSION}";' in source


def test_the_java_tests_copy_of_the_shared_vectors_is_the_shared_file():
    """A copy of shared/clients/java alone (a vendor's build) runs the token vectors from its
    test resources: they must be the shared ones (after ``make client-vectors``, copy
    shared/clients/testdata/vectors.json to shared/clients/java/src/test/resources/)."""
    shared = REPO / "shared" / "clients" / "testdata" / "vectors.json"
    copy = JAVA_DIR / "src" / "test" / "resources" / "vectors.json"
    assert copy.read_bytes() == shared.read_bytes(), f"cp {shared} {copy}"


def test_the_documented_maven_command_passes_from_a_clean_copy_with_no_server(
    java_toolchain, tmp_path
):
    """Issue 48: ``mvn -o -Dmaven.repo.local=/usr/share/maven-repo package`` in a clean copy
    of shared/clients/java (no target/ or build/), no server, no SEATLEASE_* variable: the
    jar is built and the tests that need nothing pass, none skipped; the live ones are not
    run (they are tagged, for -Plive)."""
    copy = tmp_path / "java"
    shutil.copytree(JAVA_DIR, copy, ignore=shutil.ignore_patterns("target", "build"))
    env = {name: value for name, value in os.environ.items() if not name.startswith("SEATLEASE_")}
    maven = subprocess.run(
        DOCUMENTED, cwd=copy, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    output = maven.stdout + maven.stderr
    assert maven.returncode == 0, output[-12000:]
    totals, names = surefire_reports(copy)
    assert totals["tests"] > 0 and totals["failures"] == 0 and totals["errors"] == 0, totals
    assert totals["skipped"] == 0, totals
    assert set(names) == OFFLINE, sorted(names)
    for kind in OFFLINE:
        for name in TESTS[kind]:
            assert name in names[kind], (kind, name, names)
    check_jar(copy)


def test_mvn_package_builds_the_jar_and_its_junit_tests_pass_against_the_served_functions(
    java_toolchain, client_functions, tmp_path
):
    license_id = "java-shared-borrow"
    post_json(
        f"{client_functions.url}/_test/license",
        {"license_id": license_id, "seats": 2, "max_borrow_seconds": 86400},
    )
    pinned = deployment_keys(client_functions.url)
    python_client = SeatClient(
        client_functions.url, client_functions.api_key, pinned_keys=pinned, tenant_id="acme"
    )
    from_python, for_python = tmp_path / "from-python.json", tmp_path / "for-python.json"
    borrowed = python_client.borrow(license_id, "python-laptop", 3600, path=from_python)

    shutil.rmtree(JAVA_DIR / "target" / "surefire-reports", ignore_errors=True)
    with bad_server() as bad_url:
        env = {
            **client_functions.env(),
            "SEATLEASE_BAD_URL": bad_url,
            "SEATLEASE_BORROWED_BY_PYTHON": str(from_python),
            "SEATLEASE_BORROW_FOR_PYTHON": str(for_python),
        }
        maven = subprocess.run(
            [*DOCUMENTED, "-Plive"],
            cwd=JAVA_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    output = maven.stdout + maven.stderr
    assert maven.returncode == 0, output[-12000:]

    totals, names = surefire_reports()
    assert totals["tests"] > 0 and totals["failures"] == 0 and totals["errors"] == 0, totals
    assert totals["skipped"] == 0, totals
    for kind, tests in TESTS.items():
        for name in tests:
            assert name in names.get(kind, []), (kind, name, names)
    # the live classes ran (not skipped, not filtered out): -Plive in CI
    assert set(TESTS) - OFFLINE <= set(names), sorted(names)
    # one test per shared vector and per bad answer (dynamic tests)
    assert names["VectorTests"].count("everyVector") >= 31, names["VectorTests"]
    assert names["BadAnswerTests"].count("everyBadAnswerIsATypedError") >= 21

    check_jar(JAVA_DIR)

    # The Java client loaded the Python client's seat and returned it early...
    assert not from_python.exists()
    _, live = post_json(f"{client_functions.url}/_test/live?license_id={license_id}", {})
    assert borrowed.session_id not in [seat["session_id"] for seat in live]
    # ...and the seat it borrowed loads in the Python client, offline, and is returned.
    seat = python_client.load_borrowed(for_python)
    assert seat.client_id == "java-laptop" and 3500 < seat.seconds_left <= 3600
    assert live == [{"session_id": seat.session_id, "client_id": "java-laptop"}]
    assert seat.return_early()["released"] is True
    _, live = post_json(f"{client_functions.url}/_test/live?license_id={license_id}", {})
    assert live == []
