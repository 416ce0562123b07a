"""The publish tests never run on the host's network: where a test's network namespace
cannot be made, the `net` fixture fails with the reason (it used to fall back to the
host's first LAN address and send test traffic there)."""
import pytest

import publish_support
from publish_support import NamespaceUnavailable, make_namespace


def test_a_failed_netns_add_fails_instead_of_using_the_host(monkeypatch):
    real_run = publish_support._run

    def run(args, timeout=20, check=True):
        if args[:3] == ["ip", "netns", "add"]:
            raise RuntimeError(f"{' '.join(args)} exited 1: mount --make-shared /run/netns failed: Operation not permitted")
        return real_run(args, timeout=timeout, check=check)
    monkeypatch.setattr(publish_support, "_run", run)
    with pytest.raises(NamespaceUnavailable, match="do not fall back to the host's network"):
        make_namespace()


def test_no_iproute2_fails_instead_of_using_the_host(monkeypatch):
    monkeypatch.setattr(publish_support.shutil, "which", lambda name: None)
    with pytest.raises(NamespaceUnavailable, match="iproute2"):
        make_namespace()


def test_the_fixture_makes_a_namespace_of_the_tests_own(net):
    assert net.name and net.name.startswith("camagent-test-") and net.addr == publish_support.NS_ADDR
    addresses = net.run(["ip", "-4", "-o", "addr", "show"], timeout=10).stdout
    assert f"{publish_support.NS_ADDR}/{publish_support.NS_PREFIX}" in addresses and "cam0" in addresses, addresses
