"""What the `polyhal serve` tests share: starting a server on a free
loopback port from a config, HTTP requests with Python's own client, and
failing with a message; every server started is killed at exit, even when
a check fails."""
import atexit
import http.client
import json
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
