"""The program the model download Job runs (shipped as text, run with `python -c`).

It fills the Hugging Face cache on the model-cache PVC once, and records when it started and
finished so the download is reported apart from steady-state serving:
- skips (exit 0, logged as skipped) when a previous run marked the snapshot complete and the
  snapshot folder is still there;
- writes `<cache>/.dynamo-bench/downloads/<slug>.json` {model, revision, snapshot, started_at,
  finished_at, seconds, skipped} and prints the same JSON on a `DOWNLOAD_TIMING` log line;
- marks completion only after `snapshot_download` returned, so an interrupted download is
  resumed (huggingface_hub keeps finished files) by the Job's next attempt.

Inputs come from the environment: MODEL_ID, MODEL_REVISION (optional), HF_HOME, HF_TOKEN.
"""

from __future__ import annotations

DOWNLOAD_SCRIPT = r'''
import datetime, json, os, pathlib, re, sys, time

def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()

model = os.environ["MODEL_ID"]
revision = os.environ.get("MODEL_REVISION") or None
home = pathlib.Path(os.environ["HF_HOME"])
slug = re.sub(r"[^A-Za-z0-9_.-]+", "--", model + "@" + (revision or "main"))
records = home / ".dynamo-bench" / "downloads"
records.mkdir(parents=True, exist_ok=True)
marker, timing = records / (slug + ".complete"), records / (slug + ".json")

if marker.exists() and pathlib.Path(marker.read_text().strip()).is_dir():
    record = json.loads(timing.read_text()) if timing.exists() else {"model": model}
    print("DOWNLOAD_SKIPPED " + json.dumps({**record, "skipped": True}), flush=True)
    sys.exit(0)

from huggingface_hub import snapshot_download

started, t0 = now(), time.monotonic()
print("DOWNLOAD_START " + json.dumps({"model": model, "revision": revision,
                                     "started_at": started}), flush=True)
snapshot = snapshot_download(repo_id=model, revision=revision,
                             cache_dir=str(home / "hub"), token=os.environ.get("HF_TOKEN"))
record = {"model": model, "revision": revision, "snapshot": snapshot, "started_at": started,
          "finished_at": now(), "seconds": round(time.monotonic() - t0, 3), "skipped": False}
timing.write_text(json.dumps(record, indent=1))
marker.write_text(snapshot)
print("DOWNLOAD_TIMING " + json.dumps(record), flush=True)
'''
