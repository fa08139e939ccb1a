"""Reports progress with the standard library and the three variables only (no kubetrain), as any Trainer v2
instrumented script would, and prints each answer: ``report <n>: HTTP <code> <message>``.

    --reports P:E:LOSS ...   the reports to send, in order (progress, seconds left, loss)
    --pause S                seconds between reports
    --wait-for FILE          before the last report, wait (at most a minute) until FILE exists
    --job NAME               report to job NAME's status path instead of this job's
    --token TEXT             send TEXT instead of the token the file holds
    --hang                   after the reports, stay alive without reporting (until stopped)
    --hang-once FILE         --hang only while FILE does not exist (it is created first): a restart reports
                             and exits 0
    --show                   first print the three variables: ``variables: <url> <ca file> <token file>``
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def post(url: str, ca_file: str, token: str, body: object) -> tuple[int, str]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    context = ssl.create_default_context(cafile=ca_file)
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as answer:
            return answer.status, ""
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read()).get("message", "")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reports", nargs="*", default=[])
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--wait-for", type=Path)
    parser.add_argument("--job")
    parser.add_argument("--token")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--hang-once", type=Path)
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args()

    url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
    ca_file = os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"]
    if args.show:
        print("variables:", url, ca_file, os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"], flush=True)
    token = args.token or Path(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read_text().strip()
    if args.job:
        head, _, _ = url.rstrip("/").removesuffix("/status").rpartition("/")
        url = f"{head}/{args.job}/status"
    hang = args.hang
    if args.hang_once is not None:
        hang = not args.hang_once.exists()
        args.hang_once.touch()
    for number, report in enumerate(args.reports, 1):
        if args.wait_for is not None and number == len(args.reports):
            deadline = time.monotonic() + 180  # tests/waiting.py's PATIENCE: the test's checks come first
            while not args.wait_for.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        progress, remaining, loss = report.split(":")
        body = {
            "trainerStatus": {
                "progressPercentage": int(progress),
                "estimatedRemainingSeconds": int(remaining),
                "metrics": [{"name": "loss", "value": loss}, {"name": "phase", "value": "train"}],
            }
        }
        code, message = post(url, ca_file, token, body)
        print(f"report {number}: HTTP {code} {message}".rstrip(), flush=True)
        time.sleep(args.pause)
    while hang:
        time.sleep(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
