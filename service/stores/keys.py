"""Every Redis key name of the service, in one place (arq's ``constants.py`` habit).

With the default ``redis.prefix`` ``verifier:`` (``VERIFIER_REDIS__PREFIX``)::

    verifier:jobs                      stream of job JSON (field "job"), consumer group "workers"
    verifier:dead                      dead-letter stream (job JSON, entry id, deliveries)
    verifier:workers                   sorted set: worker consumer -> when last seen (pull, renew)
    verifier:jobs:<model>              with VERIFIER_MODELS: each model's own stream (group
    verifier:dead:<model>              "workers"), dead letters and worker set; the rest is
    verifier:workers:<model>           shared
    verifier:result:<tenant>:<id>      string, the JobResult JSON; SET NX + EX result_ttl_s
    verifier:notify:<tenant>:<id>      list the submitter BLPOPs; same TTL as the result
    verifier:cancel:<id>               marker: the submitter gave up, workers skip the job
    verifier:waiters:<id>              callers waiting on a job shared by an idempotency key
    verifier:idem:<tenant>:<key>       idempotency record -> job id; EX result_ttl_s
    verifier:judgment:<digest>         a cached judgment (JSON); EX cache.ttl_s
    verifier:judgments                 sorted set of cached judgment keys by time (size cap)
    verifier:calib:<tenant>:<id>       a fitted MCQ calibration (JSON), kept until deleted
    verifier:calibs:<tenant>           set of that tenant's calibration ids
    verifier:pcalib:<tenant>:<id>      a fitted probability calibration (JSON), kept until deleted
    verifier:pcalibs:<tenant>          set of that tenant's probability calibration ids
    verifier:pcalib_defaults:<tenant>  hash: target -> the tenant's default probability calibration
    verifier:apikey:<sha256 hex>       an API key's record (hash; service/stores/auth.py)
    verifier:apikeys                   set of the key digests, for listing and revoking
    verifier:quota:<tenant>:<window>   tokens a tenant used in a quota window; EX window_s + 60
    verifier:inflight:<tenant>         reward items a tenant has in flight (leases; zset)

Results and idempotency records are scoped by tenant, so one tenant can neither read
another's result nor collide with its idempotency keys. Job ids are unguessable
(``secrets.token_urlsafe``) and tenants cannot contain ``:`` (checked by ``Job``).
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "workers"
JOB_FIELD = "job"
# The dead-letter stream is for inspection; an approximate cap keeps it bounded.
DEAD_MAXLEN = 10_000


@dataclass(frozen=True)
class RedisNames:
    """Redis key names under one prefix; tests use a fresh prefix each so they never collide."""

    prefix: str
    model: str = ""  # one of VERIFIER_MODELS: its own stream and dead letters

    @property
    def stream(self) -> str:
        return f"{self.prefix}jobs:{self.model}" if self.model else f"{self.prefix}jobs"

    @property
    def dead(self) -> str:
        return f"{self.prefix}dead:{self.model}" if self.model else f"{self.prefix}dead"

    @property
    def workers(self) -> str:
        return f"{self.prefix}workers:{self.model}" if self.model else f"{self.prefix}workers"

    def result(self, tenant: str, job_id: str) -> str:
        return f"{self.prefix}result:{tenant}:{job_id}"

    def notify(self, tenant: str, job_id: str) -> str:
        return f"{self.prefix}notify:{tenant}:{job_id}"

    def cancel(self, job_id: str) -> str:
        return f"{self.prefix}cancel:{job_id}"

    def waiters(self, job_id: str) -> str:
        return f"{self.prefix}waiters:{job_id}"

    def idem(self, tenant: str, key: str) -> str:
        return f"{self.prefix}idem:{tenant}:{key}"

    def judgment(self, digest: str) -> str:
        # The digest covers the tenant (see serving/cache.py), so entries never cross tenants.
        return f"{self.prefix}judgment:{digest}"

    @property
    def judgment_index(self) -> str:
        return f"{self.prefix}judgments"

    def calibration(self, tenant: str, calibration_id: str) -> str:
        return f"{self.prefix}calib:{tenant}:{calibration_id}"

    def calibrations(self, tenant: str) -> str:
        return f"{self.prefix}calibs:{tenant}"

    def probability_calibration(self, tenant: str, calibration_id: str) -> str:
        return f"{self.prefix}pcalib:{tenant}:{calibration_id}"

    def probability_calibrations(self, tenant: str) -> str:
        return f"{self.prefix}pcalibs:{tenant}"

    def probability_calibration_defaults(self, tenant: str) -> str:
        return f"{self.prefix}pcalib_defaults:{tenant}"

    def apikey(self, digest: str) -> str:
        return f"{self.prefix}apikey:{digest}"

    @property
    def apikeys(self) -> str:
        return f"{self.prefix}apikeys"

    def quota(self, tenant: str, window: int) -> str:
        return f"{self.prefix}quota:{tenant}:{window}"

    def inflight(self, tenant: str) -> str:
        return f"{self.prefix}inflight:{tenant}"
