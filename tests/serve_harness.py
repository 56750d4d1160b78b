"""What the `polyhal serve` tests share: starting a server on a free
loopback port from a config, HTTP requests with Python's own client, and
failing with a message; every server started is killed at exit, even when
a check fails; the real clients' interpreter (client-venv)."""
import atexit
import http.client
import json
import os
import subprocess
import sys

servers = []


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


@atexit.register
def stop_all():
    for process in servers:
        if process.poll() is None:
            process.kill()
            process.wait()


def start(polyhal, config_path, *options):
    """Starts `polyhal serve CONFIG`; returns (process, port) once it listens."""
    process = subprocess.Popen([polyhal, "serve", config_path, "--log-level", "warn", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    servers.append(process)
    said = []
    while True:  # warnings may come first
        line = process.stdout.readline()
        said.append(line)
        if "listening on http://127.0.0.1:" in line:
            break
        if not line or len(said) > 50:
            process.kill()
            fail("serve did not start: " + "".join(said) + process.stdout.read())
    port = int(line.split("127.0.0.1:")[1].split("/")[0])
    return process, port


def request(port, method, path, body=None, headers=None, timeout=30):
    """(status, headers, payload bytes); a dict body is sent as JSON."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    all_headers = {"Content-Type": "application/json"} if data is not None else {}
    all_headers.update(headers or {})
    connection.request(method, path, body=data, headers=all_headers)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), payload


def expect(port, method, path, body, status, needle, headers=None):
    """The request gets `status` and a JSON body holding `needle`."""
    got, answer_headers, payload = request(port, method, path, body, headers)
    try:
        error = json.loads(payload)
    except ValueError:
        fail(f"{method} {path}: {got} with a body that is not JSON: {payload[:200]!r}")
    if got != status or needle not in json.dumps(error):
        fail(f"{method} {path} {str(body)[:60]!r}: {got} {payload[:300]!r}, expected {status} "
             f"with {needle!r}")
    return answer_headers


def close_to(a, b, tolerance=1e-5):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= tolerance


def client_python(polyhal):
    """The interpreter of BUILD_DIR/client-venv (scripts/client-venv.sh:
    openai and requests, pinned) beside POLYHAL's build, or None."""
    python = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(polyhal))),
                          "client-venv", "bin", "python")
    return python if os.path.exists(python) else None


def run_client(python, script, *args):
    """Runs a client script with the client venv's interpreter; fails with
    its output unless it exits 0, and returns what it printed."""
    result = subprocess.run([python, script, *map(str, args)], capture_output=True, text=True,
                            timeout=120)
    if result.returncode != 0:
        fail(f"{os.path.basename(script)}: {result.stdout}{result.stderr[-2000:]}")
    return result.stdout.strip()
