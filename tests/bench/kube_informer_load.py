#!/usr/bin/env python3
"""Loads realistic Nodes and Pods into the test API server for the informer benchmark.

    kube_informer_load.py KUBECONFIG NODES PODS

Objects look like those of an EKS cluster: Nodes with labels, taints, conditions, addresses,
nodeInfo, 30 images and managedFields (about 11 KB of JSON each); Pods of a Deployment with
two containers, env, probes, resources, a projected service-account volume, tolerations,
status and managedFields (about 6 KB each), four per node. Prints one JSON line with the counts,
the average sizes and the time taken."""
import base64
import http.client
import json
import os
import ssl
import sys
import tempfile
import threading
import time
import uuid

THREADS = 6


def kubeconfig(path):
    with open(path) as f:
        kc = json.load(f)
    cluster = kc["clusters"][0]["cluster"]
    token = kc["users"][0]["user"]["token"]
    host, port = cluster["server"].split("//")[1].split(":")
    ctx = ssl.create_default_context()
    ca = base64.b64decode(cluster["certificate-authority-data"])
    with tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False) as f:
        f.write(ca)
    ctx.load_verify_locations(f.name)
    os.unlink(f.name)
    return host, int(port), token, ctx


def managed_fields(manager, op, fields):
    return {"manager": manager, "operation": op, "apiVersion": "v1",
            "time": "2025-05-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}


def node(i):
    name = "ip-10-%d-%d-%d.eu-central-1.compute.internal" % (i // 65536 % 256, i // 256 % 256, i % 256)
    zone = "eu-central-1" + "abc"[i % 3]
    iid = "i-%017x" % (0x0abc000000000000 + i)
    images = [{"names": ["602401143452.dkr.ecr.eu-central-1.amazonaws.com/eks/image-%d@sha256:%064x" % (k, k * 7919 + i),
                         "602401143452.dkr.ecr.eu-central-1.amazonaws.com/eks/image-%d:v1.%d.%d" % (k, k, i % 10)],
               "sizeBytes": 10000000 + k * 123457} for k in range(30)]
    conds = []
    for t, reason, msg in (("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                           ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                           ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                           ("Ready", "KubeletReady", "kubelet is posting ready status")):
        conds.append({"type": t, "status": "True" if t == "Ready" else "False",
                      "lastHeartbeatTime": "2025-05-01T10:00:00Z",
                      "lastTransitionTime": "2025-04-01T10:00:00Z", "reason": reason, "message": msg})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "m5.xlarge",
                       "beta.kubernetes.io/os": "linux", "eks.amazonaws.com/capacityType": "ON_DEMAND",
                       "eks.amazonaws.com/nodegroup": "workers-%d" % (i % 4),
                       "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
                       "failure-domain.beta.kubernetes.io/region": "eu-central-1",
                       "failure-domain.beta.kubernetes.io/zone": zone, "kubernetes.io/arch": "amd64",
                       "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "node.kubernetes.io/instance-type": "m5.xlarge",
                       "topology.ebs.csi.aws.com/zone": zone, "topology.kubernetes.io/region": "eu-central-1",
                       "topology.kubernetes.io/zone": zone},
            "annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.%d.%d" % (i // 256 % 256, i % 256),
                            "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": iid}),
                            "node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [
                managed_fields("kubelet", "Update", {"f:metadata": {"f:annotations": {".": {}, "f:alpha.kubernetes.io/provided-node-ip": {}, "f:volumes.kubernetes.io/controller-managed-attach-detach": {}}, "f:labels": {".": {}, "f:beta.kubernetes.io/arch": {}, "f:beta.kubernetes.io/os": {}, "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {}, "f:kubernetes.io/os": {}}}, "f:spec": {"f:providerID": {}}}),
                managed_fields("kube-controller-manager", "Update", {"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}}, "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, "v:\"10.1.0.0/24\"": {}}}}),
                managed_fields("kubelet", "Update", {"f:status": {"f:allocatable": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}}, "f:capacity": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}}, "f:conditions": {"k:{\"type\":\"DiskPressure\"}": {"f:lastHeartbeatTime": {}}, "k:{\"type\":\"MemoryPressure\"}": {"f:lastHeartbeatTime": {}}, "k:{\"type\":\"PIDPressure\"}": {"f:lastHeartbeatTime": {}}, "k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}}}, "f:images": {}, "f:nodeInfo": {"f:bootID": {}, "f:kernelVersion": {}}}}),
            ],
        },
        "spec": {"providerID": "aws:///%s/%s" % (zone, iid), "podCIDR": "10.1.%d.0/24" % (i % 256),
                 "podCIDRs": ["10.1.%d.0/24" % (i % 256)],
                 "taints": [{"key": "dedicated", "value": "workers", "effect": "PreferNoSchedule"}] if i % 5 == 0 else []},
        "status": {
            "capacity": {"cpu": "4", "ephemeral-storage": "83873772Ki", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "memory": "15834168Ki", "pods": "58"},
            "allocatable": {"cpu": "3920m", "ephemeral-storage": "76224326324", "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "memory": "14817336Ki", "pods": "58"},
            "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": "10.0.%d.%d" % (i // 256 % 256, i % 256)},
                          {"type": "InternalDNS", "address": name},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": uuid.UUID(int=i).hex, "systemUUID": str(uuid.UUID(int=i + 7)),
                         "bootID": str(uuid.UUID(int=i + 13)), "kernelVersion": "5.10.215-203.850.amzn2.x86_64",
                         "osImage": "Amazon Linux 2", "containerRuntimeVersion": "containerd://1.7.11",
                         "kubeletVersion": "v1.32.3-eks-59bf375", "kubeProxyVersion": "v1.32.3-eks-59bf375",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "images": images,
        },
    }


def pod(i, node_name):
    app = "service-%d" % (i % 200)
    name = "%s-7d9f8b6c5d-%05x" % (app, i)
    ns = "team-%d" % (i % 20)
    env = [{"name": "ENV_%d" % k, "value": "value-%d-%d" % (k, i)} for k in range(6)]
    mounts = [{"name": "config", "mountPath": "/etc/config", "readOnly": True},
              {"name": "kube-api-access-%05x" % (i % 99999), "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}]
    main = {"name": "app", "image": "123456789012.dkr.ecr.eu-central-1.amazonaws.com/%s:1.%d.%d" % (app, i % 7, i % 13),
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}], "env": env,
            "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}},
            "volumeMounts": mounts,
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    side = {"name": "envoy", "image": "envoyproxy/envoy:v1.29.1", "args": ["--config-path", "/etc/envoy/envoy.yaml"],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}, "volumeMounts": mounts[1:],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    cstat = [{"name": c, "state": {"running": {"startedAt": "2025-05-01T10:01:00Z"}}, "lastState": {}, "ready": True,
              "restartCount": 0, "image": img, "imageID": "docker-pullable://%s@sha256:%064x" % (img.split(":")[0], i),
              "containerID": "containerd://%064x" % (i * 31 + len(c)), "started": True}
             for c, img in (("app", main["image"]), ("envoy", side["image"]))]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns, "generateName": "%s-7d9f8b6c5d-" % app,
            "labels": {"app": app, "pod-template-hash": "7d9f8b6c5d", "team": ns, "version": "v1"},
            "annotations": {"kubernetes.io/psp": "eks.privileged", "prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "%s-7d9f8b6c5d" % app,
                                 "uid": str(uuid.UUID(int=i % 200 + 1000)), "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [
                managed_fields("kube-controller-manager", "Update", {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}}, "f:ownerReferences": {".": {}, "k:{\"uid\":\"x\"}": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:env": {}, "f:image": {}, "f:livenessProbe": {}, "f:ports": {}, "f:readinessProbe": {}, "f:resources": {}, "f:volumeMounts": {}}}, "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:volumes": {}}}),
                managed_fields("kubelet", "Update", {"f:status": {"f:conditions": {"k:{\"type\":\"ContainersReady\"}": {".": {}, "f:status": {}, "f:type": {}}, "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}}),
            ],
        },
        "spec": {
            "containers": [main, side], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": app, "serviceAccount": app, "nodeName": node_name,
            "securityContext": {"runAsNonRoot": True, "fsGroup": 2000}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "volumes": [{"name": "config", "configMap": {"name": "%s-config" % app, "defaultMode": 420}},
                        {"name": mounts[1]["name"], "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2025-05-01T10:01:00Z"}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "hostIP": "10.0.%d.%d" % (i // 1024 % 256, i // 4 % 256), "podIP": "10.1.%d.%d" % (i // 256 % 256, i % 256),
            "podIPs": [{"ip": "10.1.%d.%d" % (i // 256 % 256, i % 256)}], "startTime": "2025-05-01T10:00:30Z",
            "containerStatuses": cstat, "qosClass": "Burstable",
        },
    }


def poster(host, port, token, ctx, items, errors):
    conn = http.client.HTTPSConnection(host, port, context=ctx)
    hdrs = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    for path, body in items:
        for attempt in range(3):
            try:
                conn.request("POST", path, body=body, headers=hdrs)
                r = conn.getresponse()
                r.read()
                if r.status not in (201, 409):
                    errors.append("%s %d" % (path, r.status))
                break
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPSConnection(host, port, context=ctx)
    conn.close()


def main():
    host, port, token, ctx = kubeconfig(sys.argv[1])
    n_nodes, n_pods = int(sys.argv[2]), int(sys.argv[3])
    t0 = time.time()
    nodes = [node(i) for i in range(n_nodes)]
    items, sizes = [], {"Node": 0, "Pod": 0}
    for nd in nodes:
        b = json.dumps(nd).encode()
        sizes["Node"] += len(b)
        items.append(("/api/v1/nodes", b))
    namespaces = sorted({"team-%d" % (i % 20) for i in range(n_pods)})
    for ns in namespaces:
        items.insert(0, ("/api/v1/namespaces", json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}).encode()))
    for i in range(n_pods):
        p = pod(i, nodes[i * n_nodes // max(n_pods, 1)]["metadata"]["name"] if n_nodes else "none")
        b = json.dumps(p).encode()
        sizes["Pod"] += len(b)
        items.append(("/api/v1/namespaces/%s/pods" % p["metadata"]["namespace"], b))
    # namespaces first, on their own
    ns_items = [it for it in items if it[0] == "/api/v1/namespaces"]
    rest = [it for it in items if it[0] != "/api/v1/namespaces"]
    errors = []
    poster(host, port, token, ctx, ns_items, errors)
    threads = [threading.Thread(target=poster, args=(host, port, token, ctx, rest[k::THREADS], errors))
               for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"nodes": n_nodes, "pods": n_pods,
                      "node_json_bytes": sizes["Node"] // max(n_nodes, 1),
                      "pod_json_bytes": sizes["Pod"] // max(n_pods, 1),
                      "errors": len(errors), "first_errors": errors[:3],
                      "seconds": round(time.time() - t0, 1)}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
