"""The controller worker: NodeRemediation workflows and the cluster-side activities."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from temporalio.client import Client
from temporalio.worker import Worker

from activities.budget import BudgetActivities
from activities.cluster import ClusterActivities
from activities.node import NodeActivities
from remedy.budget import BudgetPolicy
from remedy.cluster import Cluster
from remedy.host import NodeHost
from remedy.names import CONTROLLER_TASK_QUEUE
from workflows.disruption_budget import DisruptionBudget
from workflows.node_remediation import NodeRemediation


def controller_worker(client: Client, cluster: Cluster, executor: ThreadPoolExecutor,
                      task_queue: str = CONTROLLER_TASK_QUEUE,
                      policy: BudgetPolicy | None = None) -> Worker:
    budget = BudgetActivities(client, cluster.pool_size, policy or BudgetPolicy())
    return Worker(client, task_queue=task_queue, workflows=[NodeRemediation, DisruptionBudget],
                  activities=[*ClusterActivities(cluster).all(), *budget.all()],
                  activity_executor=executor)


def node_agent_worker(client: Client, host_for: Callable[[str], NodeHost],
                      executor: ThreadPoolExecutor, task_queue: str) -> Worker:
    """The host-local activities on a node queue (the real agent, or every simulated node)."""
    activities = NodeActivities(host_for)
    return Worker(client, task_queue=task_queue, activities=activities.all(),
                  activity_executor=executor)
