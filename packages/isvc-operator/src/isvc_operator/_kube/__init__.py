"""The one part of the controller that talks to the Kubernetes API, by concern: discovery and the counted client
(`discovery`), what the cache keeps of an object (`compact`), the informer (`informer`) and the set of them
(`caches`), containers' output and events (`records`), and the Cluster port over them all (`cluster`)."""

from isvc_operator._kube.cluster import KubeCluster, apply_body
from isvc_operator._kube.discovery import api_client
from isvc_operator._kube.informer import Informer

__all__ = ["Informer", "KubeCluster", "api_client", "apply_body"]
