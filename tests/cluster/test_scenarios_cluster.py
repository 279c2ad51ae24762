"""The standalone lock and queue scenarios, run unchanged on a 3x3 cluster (both flavours,
both cores): the ``client`` fixture of tests/cluster/conftest.py is a ClusterClient. Those
left out look at every key with ``KEYS`` (one node's keys on a cluster), or bring their own
standalone servers, proxies or clients."""

from __future__ import annotations

from locks.test_lock import (  # noqa: F401 - collected here, on the cluster
    test_acquire_is_idempotent_and_tokens_increase,
    test_blocking_waiter_times_out_cleanly,
    test_blocking_waiter_wakes_when_the_holder_expires,
    test_extend,
    test_options_are_validated,
    test_scan_inspect_delete_and_changelog,
    test_strategies,
    test_ttl_expiry_frees_the_slot_and_a_late_release_frees_nothing,
    test_until_and_while_executing,
    test_until_executed,
    test_until_executing,
    test_until_expired,
    test_while_executing,
    test_while_executing_waits_for_the_runtime_lock,
)
from queues.test_queue import (  # noqa: F401 - collected here, on the cluster
    queue,
    test_batch_complete_with_a_lost_lease,
    test_custom_job_id_is_unique_while_the_job_exists,
    test_dead_letters_by_id_take_every_given_id,
    test_delayed_enqueue_comes_back_on_time,
    test_extend_keeps_leases_alive,
    test_fail_dead_letters_and_dead_letter_operations,
    test_fail_retries_at_the_right_time,
    test_keys_share_the_queue_slot,
    test_payload_round_trip_is_opaque,
    test_priorities_after_plain_jobs_lowest_first_fifo_within,
    test_recover_is_bounded_and_stops_poison_jobs,
    test_retried_complete_is_idempotent_and_still_claims,
    test_stale_worker_is_refused_everywhere,
    test_tokens_strictly_increase,
    test_unique_digest_is_the_lock_digest,
    test_unique_until_executed,
    test_unique_until_executing,
    test_unique_until_expired,
    test_wait_blocks_until_work_is_signalled,
)
from queues.test_queue_ages import (  # noqa: F401 - collected here, on the cluster
    test_each_first_claim_reports_how_long_it_waited,
    test_the_oldest_ready_job_age,
    waits,
)
from queues.test_queue_schedule import (  # noqa: F401 - collected here, on the cluster
    test_a_worker_runs_a_scheduler,
    test_catch_up_after_an_outage,
    test_register_list_update_remove,
)
