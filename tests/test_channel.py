"""The scorer <-> rank channel (hwbackend/protocol.py) delivers a message whole, whatever its size, also from a
socket with a timeout set, as the scorer's are while it waits for the ranks."""
import socket
import threading

from hwbackend.protocol import Channel


def _through(sender_timeout: float | None, size: int):
    """What the far end reads of one message of `size` seeds sent over a socket pair (None: nothing whole within
    10 s), the reader starting only once the sender is done, as a rank does when it is busy elsewhere."""
    a, b = socket.socketpair()
    a.settimeout(sender_timeout)
    sender, receiver = Channel(a), Channel(b)
    seeds = [[i, i + 1] for i in range(size)]
    done = threading.Event()
    threading.Thread(target=lambda: (sender.send(phase="fill", seeds=seeds), done.set()), daemon=True).start()
    done.wait(0.5)   # the sender writes what fits before anyone reads
    got = []
    b.settimeout(10)
    try:
        got.append(receiver.recv())
    except (TimeoutError, ValueError):
        pass
    a.close()
    b.close()
    return (got[0]["seeds"] == seeds) if got else None


def test_a_message_larger_than_the_socket_s_buffer_arrives_whole_from_a_socket_with_a_timeout():
    assert _through(5.0, 20000)     # about 300 KB: beyond the default buffer of a Unix socket


def test_a_small_message_arrives_whole_either_way():
    assert _through(None, 10) and _through(5.0, 10)
