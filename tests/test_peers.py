"""`pipelines.peers.Peer`: an optional dependency imported on first use, its reason read as a class attribute."""
from __future__ import annotations

import pytest

from pipelines.peers import Peer


def test_a_peer_loads_once_on_first_use_and_reads_as_no_reason():
    calls = []
    peer = Peer(lambda: calls.append(1) or "module", lambda e: f"never ({e})")

    class P:
        missing = peer

    assert calls == []   # defining the class imports nothing
    assert P.missing == "" and peer.get() == "module" and peer.get() == "module"
    assert calls == [1]


def test_a_peer_that_cannot_load_says_why_and_refuses_to_be_used():
    def load():
        raise ImportError("No module named 'somepeer'")
    peer = Peer(load, lambda e: f"somepeer is not installed: pip install somepeer ({e})")

    class P:
        missing = peer

    assert P.missing == "somepeer is not installed: pip install somepeer (No module named 'somepeer')"
    with pytest.raises(ImportError, match="^somepeer is not installed"):
        peer.get()


def test_only_the_errors_named_make_a_peer_unavailable():
    def load():
        raise OSError("libsomething.so: cannot open shared object file")
    tolerant = Peer(load, lambda e: f"cannot load ({e})", errors=(ImportError, OSError))
    with pytest.raises(ImportError, match="cannot load"):
        tolerant.get()
    strict = Peer(load, lambda e: f"cannot load ({e})")
    with pytest.raises(OSError):   # not an ImportError: a fault, not a missing peer
        strict.get()
