"""llama.cpp's own OpenAI-compatible server (llama-cpp-python's server extra, installed by `make install`) serving
SmolLM2 on the loopback address, offline: the fixture `llama_server` (a pytest plugin of conftest.py) starts it once
per test module and stops it after; it yields the server's /v1 address and its log file."""

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

SERVED_NAME = "smollm2-135m"   # the model name requests ask for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python's server extra (make install installs it)")
    from genenv.models.registry import KNOWN_MODELS, ModelNotAvailable, packaged_file
    try:
        model = packaged_file(KNOWN_MODELS["smollm2"])
    except ModelNotAvailable as error:
        pytest.skip(str(error))
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                                   "--model_alias", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
                                   "--n_threads", "1", "--n_ctx", "2048"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(240):
            if server.poll() is not None:
                pytest.fail(f"llama.cpp server exited: {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/models", timeout=1).read()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"llama.cpp server did not answer in 120 s: {log.read_text()[-2000:]}")
        yield url, log
    finally:
        server.terminate()
        server.wait(timeout=30)
