"""The throw-away PKI and the bin-dir lookup (no cluster)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from isvc_testbed import BinariesMissing, bin_dir, require_bins
from isvc_testbed._pki import Pki


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_serving_cert_covers_loopback_and_in_cluster_names(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    cert = load(pki.serving().cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc.cluster.local" in sans.get_values_for_type(x509.DNSName)
    assert cert.issuer == load(pki.ca.cert).subject


def test_client_cert_names_user_and_groups(tmp_path: Path) -> None:
    cert = load(Pki(tmp_path).client("alice", "alice", ("team-a",)).cert)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["alice"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["team-a"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_bin_dir_follows_the_build_scripts_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ISVC_BIN_DIR", raising=False)
    monkeypatch.setenv("ISVC_CACHE_DIR", str(tmp_path))
    assert bin_dir() == tmp_path / "bin"
    monkeypatch.setenv("ISVC_BIN_DIR", str(tmp_path / "elsewhere"))
    assert bin_dir() == tmp_path / "elsewhere"


def test_missing_binaries_name_the_build_command(tmp_path: Path) -> None:
    with pytest.raises(BinariesMissing, match=r"kube-apiserver.*build-bins\.sh"):
        require_bins(tmp_path)
