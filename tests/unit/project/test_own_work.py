"""The repository holds only its authors' own work: no tracked file is another project's file.

Facts from elsewhere (a wire protocol's field numbers, a CRD's field types, the shape of NVIDIA's configs) are
written here in our words with their source named; another project's text is not. This walks every file
`git ls-files` lists and fails on:

- another project's copyright line or licence header (the only licence text allowed is our own `LICENSE`, by that
  exact path, should one be added);
- a file that says it is a copy of someone else's (byte for byte, word for word, brought in unchanged);
- the exact bytes of a third-party file this repository once held (their git blob ids, below);
- the ClusterPolicy CRD schema NVIDIA wrote, inside the recorded API transcripts (kept out since issue 24).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[3]
OWN_LICENSE = PurePosixPath("LICENSE")

# Words that open another project's copyright notice or licence grant. Written so that this file's own source
# does not match them (a character class in each), which keeps the walk free of exceptions for itself.
HEADERS = [
    (re.compile(r"\bcop[y]right\s*(?:\(c\)|©|\d{4})", re.I), "a copyright line"),
    (re.compile(r"\bSPDX-Licen[s]e-Identifier\b"), "an SPDX licence tag"),
    (re.compile(r"\blicen[s]ed under the\b", re.I), "a licence grant"),
    (re.compile(r"\bpermission is hereby [g]ranted\b", re.I), "the MIT/X11 licence text"),
    (re.compile(r"\bredistribution and use in source and binary form[s]?\b", re.I), "the BSD licence text"),
    (re.compile(r"\bGNU (?:Lesser |Affero )?General Public Licen[s]e\b", re.I), "a GNU licence"),
    (re.compile(r"\bMozilla Public Licen[s]e\b", re.I), "the Mozilla licence"),
    (re.compile(r"\ball rights reserve[d]\b", re.I), "a rights-reserved notice"),
]
# Ways a file says it is (or holds) a copy of another project's file.
COPY_CLAIMS = [
    (re.compile(r"\bbyte[- ]for[- ]byte cop(?:y|ies)\b|\bbyte cop(?:y|ies) o[f]\b", re.I), "a byte copy"),
    (re.compile(r"\bcopied (?:byte[- ]for[- ]byte|verbatim|unchanged)\b", re.I), "a file copied without change"),
    (re.compile(r"\bverbatim cop(?:y|ies)\b", re.I), "a word-for-word copy"),
    (re.compile(r"\bvendored (?:cop(?:y|ies) )?from\b", re.I), "a file brought in from another project"),
    (
        re.compile(
            r"\bcopied from (?:upstream\b|github\.com/|(?:kubernetes|nvidia|oasis-tcs|grpc|protocolbuffers)/)", re.I
        ),
        "copied from another repository",
    ),
]
# Git blob ids of third-party files this repository held before issue 24 (each equal to the upstream file's blob):
# the kubelet's PodResources api.proto, NVIDIA's ClusterPolicy CRD, four mig-parted configs and the GPU-clients
# ConfigMap from NVIDIA/mig-parted and NVIDIA/gpu-operator, and OASIS's SARIF 2.1.0 schema.
THIRD_PARTY_BLOBS = {
    "047ee50307d857fea2bbe2c227b1dcc182e4ce4f": "kubernetes podresources/v1/api.proto",
    "f589282b2001c999f233747f263bd29abaebe8b3": "gpu-operator config/crd/bases/nvidia.com_clusterpolicies.yaml",
    "90cdde0954d4c405ca41353fc58d5cd67111eb68": "gpu-operator assets/state-mig-manager/0400_configmap.yaml",
    "ceb8e68952c103936a96a7173cf43c9e47baadd7": "gpu-operator assets/state-mig-manager/0410_configmap.yaml",
    "85d51174763f1de8b35695909a725534db481984": "mig-parted deployments/systemd/config-default.yaml",
    "515fa05d180d16052412df412b6aeb70e3d90e9e": "mig-parted examples/config.yaml",
    "a0226f3f9829e9aaafb4f956111df9c1a30f1b7b": "mig-parted examples/dgx-station-80gb-config.yaml",
    "0f58372b548f60c84d20fca77687435e71b3b3a3": "oasis-tcs/sarif-spec sarif-schema-2.1.0.json",
}
TRANSCRIPTS = PurePosixPath("tests/reference/kube-apiserver")


def _tracked() -> dict[PurePosixPath, bytes]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    files = {}
    for raw in out.split(b"\0"):
        if not raw:
            continue
        try:
            files[PurePosixPath(raw.decode())] = (REPO / raw.decode()).read_bytes()
        except FileNotFoundError:  # deleted in the work tree, not yet committed
            continue
    return files


FILES = _tracked()


def _blob_id(data: bytes) -> str:
    """What `git hash-object` prints for these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _findings(text: str) -> list[str]:
    found = []
    for pattern, what in HEADERS + COPY_CLAIMS:
        m = pattern.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"line {line}: {what} ({m.group(0)!r})")
    return found


def test_the_walk_sees_the_repository() -> None:
    assert len(FILES) > 400
    assert PurePosixPath("pyproject.toml") in FILES and PurePosixPath("reconciler/__init__.py") in FILES


def test_no_file_carries_another_projects_copyright_or_licence_or_says_it_is_a_copy() -> None:
    problems = []
    for path, data in FILES.items():
        if path == OWN_LICENSE:
            continue
        for finding in _findings(data.decode("utf-8", errors="replace")):
            problems.append(f"{path} {finding}")
    assert problems == [], "\n".join(problems)


def test_no_file_is_a_third_party_file_byte_for_byte() -> None:
    copies = [f"{p}: {THIRD_PARTY_BLOBS[_blob_id(d)]}" for p, d in FILES.items() if _blob_id(d) in THIRD_PARTY_BLOBS]
    assert copies == []


def test_the_transcripts_keep_no_crd_schema_text() -> None:
    """The recorded ClusterPolicy CRD's schema is NVIDIA's text: the transcripts hold a string in its place."""
    schemas = []

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "openAPIV3Schema":
                    schemas.append((where, value))
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    for path, data in FILES.items():
        if path.parent == TRANSCRIPTS and path.suffix == ".json":
            walk(json.loads(data), str(path))
    assert len(schemas) == 3  # create-crd (request and response) and get-crd-established: the walk found them
    assert [w for w, s in schemas if not isinstance(s, str)] == []


@pytest.mark.parametrize(
    "sample",
    [
        "# Cop" + "yright 2024 The Kubernetes Authors.",
        "// Cop" + "yright (c) NVIDIA CORPORATION.  All rights " + "reserved.",
        "# SPDX-" + "License-Identifier: Apache-2.0",
        "Licensed " + 'under the Apache License, Version 2.0 (the "License");',
        "Permission is " + "hereby granted, free of charge, to any person",
        "Redistribution and use " + "in source and binary forms, with or without",
        "GNU General " + "Public License",
        "api.proto is the kubelet's API, copied " + "byte for byte from kubernetes/kubernetes",
        "Byte " + "copies of NVIDIA's own data files",
        "a verbatim " + "copy of the schema",
        "vendored " + "from NVIDIA/mig-parted",
        "copied " + "from NVIDIA/gpu-operator assets/",
    ],
)
def test_the_check_catches_what_it_should(sample: str) -> None:
    assert _findings("intro\n" + sample + "\n"), sample


@pytest.mark.parametrize(
    "sample",
    [
        "written here from the facts of the kubelet's published API (Kubernetes, staging/src/k8s.io/kubelet)",
        "every report file byte for byte",  # a comparison, not a copy
        'license = "Apache-2.0"',  # our own package metadata
        "copied from shared state into the cache",
        "the GPU Operator's CRD, read at a22dbf671f2e26f9a1e342f8eea28e196235e110",
    ],
)
def test_the_check_lets_our_own_words_pass(sample: str) -> None:
    assert _findings(sample) == []


def test_the_blob_ids_are_gits() -> None:
    assert _blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git's empty blob
    assert _blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
