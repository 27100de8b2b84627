"""Where the warmup Job and the serving Deployment mount the plan, the runner and the caches."""

from __future__ import annotations

from typing import Final

# The runner requires absolute folders at least two levels deep (docs/runner.md, plan fields),
# because it empties local_dir.
PLAN_DIR: Final = "/etc/warmgate"
PLAN_FILE: Final = "plan.json"
BUCKET_FILE: Final = "buckets.txt"
RUNNER_DIR: Final = "/warmgate/runner"
CACHE_DIR: Final = "/warmgate/cache"
LOCAL_DIR: Final = "/warmgate/local"
RECIPE_DIR: Final = f"{LOCAL_DIR}/recipe_cache"
WORK_DIR: Final = f"{LOCAL_DIR}/work"
WEIGHTS_DIR: Final = "/warmgate/weights"
