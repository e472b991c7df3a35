"""The scorer's control socket lives in the job's folder; a folder deep in a user's tree (or pytest-xdist's
temporary folders) makes its path longer than the kernel's 107 bytes, and bind failed with "AF_UNIX path too
long". Both ends now reach a long path through the folder's descriptor. Twin: a short path, as before."""
import os
import socket
import threading

import pytest

from hwbackend.protocol import UNIX_PATH_MAX, Channel, connect, unix_call


@pytest.mark.parametrize("depth", [1, 12])
def test_a_control_socket_binds_and_connects_at_any_path_length(tmp_path, depth):
    folder = tmp_path.joinpath(*(["a_rather_long_folder_name"] * depth))
    folder.mkdir(parents=True)
    path = str(folder / "ctl.sock")
    assert (len(path) > UNIX_PATH_MAX) == (depth > 1)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix_call(listener, path, "bind")
    listener.listen(1)
    assert os.path.exists(path)
    got = []
    t = threading.Thread(target=lambda: got.append(Channel(listener.accept()[0]).recv()))
    t.start()
    ch = connect(path)
    ch.send(hello="rank")
    t.join(10)
    assert got and got[0]["hello"] == "rank"
