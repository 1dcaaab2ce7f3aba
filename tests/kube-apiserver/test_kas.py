#!/usr/bin/env python3
"""Unit tests of the fake API server's pure parts: selectors, patches, protobuf decoding.

Run: python3 tests/kube-apiserver/test_kas.py   (prints "PASS name" / "FAIL name: why")
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
sys.dont_write_bytecode = True

from kas import patch, proto, selectors  # noqa: E402


def labels(sel, lab):
    return selectors.match_labels(selectors.parse_labels(sel), lab)


class Selectors(unittest.TestCase):
    def test_equality(self):
        self.assertTrue(labels("a=b", {"a": "b"}))
        self.assertTrue(labels("a==b", {"a": "b", "x": "y"}))
        self.assertFalse(labels("a=b", {"a": "c"}))
        self.assertFalse(labels("a=b", {}))
        self.assertTrue(labels("a!=b", {}))
        self.assertFalse(labels("a!=b", {"a": "b"}))

    def test_sets_and_existence(self):
        sel = "env in (prod, staging),tier notin (db),app,!legacy"
        self.assertTrue(labels(sel, {"env": "prod", "tier": "web", "app": "x"}))
        self.assertFalse(labels(sel, {"env": "dev", "tier": "web", "app": "x"}))
        self.assertFalse(labels(sel, {"env": "prod", "tier": "db", "app": "x"}))
        self.assertFalse(labels(sel, {"env": "prod", "app": "x", "legacy": ""}))
        self.assertFalse(labels(sel, {"env": "prod"}))
        self.assertTrue(labels("tier notin (db)", {}))

    def test_empty_and_invalid(self):
        self.assertTrue(labels("", {"a": "b"}))
        for bad in ("a in x", "a in (x", "=b", "a b"):
            with self.assertRaises(selectors.SelectorError, msg=bad):
                selectors.parse_labels(bad)

    def test_label_selector_object(self):
        reqs = selectors.from_label_selector({"matchLabels": {"app": "db"}, "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "old", "operator": "DoesNotExist"}]})
        self.assertTrue(selectors.match_labels(reqs, {"app": "db", "zone": "a"}))
        self.assertFalse(selectors.match_labels(reqs, {"app": "db", "zone": "c"}))
        self.assertFalse(selectors.match_labels(reqs, {"app": "db", "zone": "a", "old": "1"}))
        self.assertIsNone(selectors.from_label_selector(None))
        self.assertEqual(selectors.from_label_selector({}), [])

    def test_fields(self):
        pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"},
               "status": {"phase": "Running"}}
        f = selectors.parse_fields("spec.nodeName=n1,status.phase!=Failed,metadata.namespace==ns")
        self.assertTrue(selectors.match_fields(f, pod))
        self.assertFalse(selectors.match_fields(selectors.parse_fields("spec.nodeName=n2"), pod))
        self.assertTrue(selectors.match_fields(selectors.parse_fields("spec.unschedulable=false"), {"spec": {}}))
        self.assertTrue(selectors.match_fields(selectors.parse_fields("spec.unschedulable=true"),
                                               {"spec": {"unschedulable": True}}))
        self.assertTrue(selectors.match_fields(selectors.parse_fields("spec.x="), {}))


class MergePatch(unittest.TestCase):
    def test_rfc7386(self):
        doc = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
        out = patch.merge_patch(doc, {"a": "z", "c": {"f": None}, "l": [3], "n": {"x": 1}})
        self.assertEqual(out, {"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}})


class JSONPatch(unittest.TestCase):
    def test_ops(self):
        doc = {"a": {"b": [1, 2]}, "c/d": 1, "e~f": 2}
        out = patch.json_patch(doc, [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "add", "path": "/a/b/0", "value": 0},
            {"op": "replace", "path": "/c~1d", "value": 5},
            {"op": "remove", "path": "/e~0f"},
            {"op": "copy", "from": "/a/b", "path": "/copy"},
            {"op": "move", "from": "/copy", "path": "/moved"},
            {"op": "test", "path": "/a/b/3", "value": 3}])
        self.assertEqual(out, {"a": {"b": [0, 1, 2, 3]}, "c/d": 5, "moved": [0, 1, 2, 3]})

    def test_failures(self):
        for ops in ([{"op": "test", "path": "/a", "value": 2}], [{"op": "remove", "path": "/x"}],
                    [{"op": "replace", "path": "/x", "value": 1}], [{"op": "add", "path": "/x/y", "value": 1}]):
            with self.assertRaises(patch.PatchError, msg=ops):
                patch.json_patch({"a": 1}, ops)


def pod_spec(*containers):
    return {"spec": {"containers": list(containers)}}


class StrategicMerge(unittest.TestCase):
    def test_containers_by_name(self):
        doc = pod_spec({"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]}, {"name": "b", "image": "b:1"})
        out = patch.strategic_merge(doc, pod_spec({"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}), "Pod")
        self.assertEqual([(c["name"], c["image"]) for c in out["spec"]["containers"]],
                         [("a", "a:1"), ("b", "b:2"), ("c", "c:1")])
        self.assertEqual(out["spec"]["containers"][0]["env"], [{"name": "X", "value": "1"}])

    def test_list_directives(self):
        doc = pod_spec({"name": "a"}, {"name": "b"}, {"name": "c"})
        out = patch.strategic_merge(doc, pod_spec({"name": "b", "$patch": "delete"}), "Pod")
        self.assertEqual([c["name"] for c in out["spec"]["containers"]], ["a", "c"])
        out = patch.strategic_merge(pod_spec({"name": "a"}), pod_spec({"name": "z"}, {"$patch": "replace"}), "Pod")
        self.assertEqual(out["spec"]["containers"], [{"name": "z"}])
        p = {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
                      "containers": [{"name": "a", "image": "x"}]}}
        out = patch.strategic_merge(pod_spec({"name": "a"}, {"name": "b"}, {"name": "c"}), p, "Pod")
        self.assertEqual([c["name"] for c in out["spec"]["containers"]], ["c", "a", "b"])
        self.assertEqual(out["spec"]["containers"][1]["image"], "x")

    def test_nested_keys(self):
        doc = pod_spec({"name": "a", "ports": [{"containerPort": 80, "name": "http"}],
                        "volumeMounts": [{"mountPath": "/a", "name": "v"}]})
        out = patch.strategic_merge(doc, pod_spec({"name": "a", "ports": [{"containerPort": 443}],
                                                   "volumeMounts": [{"mountPath": "/a", "readOnly": True}]}), "Pod")
        c = out["spec"]["containers"][0]
        self.assertEqual(c["ports"], [{"containerPort": 80, "name": "http"}, {"containerPort": 443}])
        self.assertEqual(c["volumeMounts"], [{"mountPath": "/a", "name": "v", "readOnly": True}])
        svc = {"spec": {"ports": [{"port": 80, "name": "a"}]}}
        out = patch.strategic_merge(svc, {"spec": {"ports": [{"port": 80, "nodePort": 30001}]}}, "Service")
        self.assertEqual(out["spec"]["ports"], [{"port": 80, "name": "a", "nodePort": 30001}])

    def test_atomic_lists(self):
        doc = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "tolerations": [{"key": "x"}]}}
        out = patch.strategic_merge(doc, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}, "Node")
        self.assertEqual(out["spec"]["taints"], [{"key": "b", "effect": "NoExecute"}])

    def test_node_status(self):
        doc = {"status": {"conditions": [{"type": "Ready", "status": "True"}],
                          "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}}
        out = patch.strategic_merge(doc, {"status": {"conditions": [{"type": "Ready", "status": "False"},
                                                                    {"type": "DiskPressure", "status": "False"}],
                                                     "addresses": [{"type": "Hostname", "address": "h"}]}}, "Node")
        self.assertEqual(out["status"]["conditions"], [{"type": "Ready", "status": "False"},
                                                       {"type": "DiskPressure", "status": "False"}])
        self.assertEqual([a["type"] for a in out["status"]["addresses"]], ["InternalIP", "Hostname"])

    def test_metadata(self):
        doc = {"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}}}
        out = patch.strategic_merge(doc, {"metadata": {"finalizers": ["c"], "labels": {"x": None}}}, "Pod")
        self.assertEqual(out["metadata"], {"finalizers": ["a", "b", "c"], "labels": {"y": "2"}})
        out = patch.strategic_merge(out, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, "Pod")
        self.assertEqual(out["metadata"]["finalizers"], ["b", "c"])

    def test_map_directives(self):
        doc = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
        out = patch.strategic_merge(doc, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
                                    "Deployment")
        self.assertEqual(out["spec"]["strategy"], {"type": "Recreate"})
        out = patch.strategic_merge({"spec": {"selector": {"a": "1"}}},
                                    {"spec": {"selector": {"$patch": "replace", "b": "2"}}}, "Service")
        self.assertEqual(out["spec"]["selector"], {"b": "2"})
        out = patch.strategic_merge({"spec": {"x": {"a": 1}, "y": 1}}, {"spec": {"x": {"$patch": "delete"}}}, "X")
        self.assertEqual(out, {"spec": {"y": 1}})


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, value):
    if isinstance(value, int):
        return _varint(num << 3) + _varint(value & ((1 << 64) - 1))
    if isinstance(value, str):
        value = value.encode()
    return _varint(num << 3 | 2) + _varint(len(value)) + value


class Protobuf(unittest.TestCase):
    def test_configmap(self):
        meta = _field(1, "cm") + _field(3, "ns") + _field(11, _field(1, "k") + _field(2, "v")) + \
            _field(8, _field(1, proto.ZERO_TIME)) + _field(7, 0)
        cm = _field(1, meta) + _field(2, _field(1, "a") + _field(2, "1")) + _field(2, _field(1, "e"))
        body = proto.MAGIC + _field(1, _field(1, "v1") + _field(2, "ConfigMap")) + _field(2, cm)
        self.assertEqual(proto.decode(body), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "ns", "labels": {"k": "v"}},
            "data": {"a": "1", "e": ""}})

    def test_special_types(self):
        # a PDB: minAvailable is an IntOrString, the selector a LabelSelector
        spec = _field(1, _field(1, 0) + _field(2, 2)) + _field(2, _field(1, _field(1, "app") + _field(2, "db")))
        body = proto.MAGIC + _field(1, _field(1, "policy/v1") + _field(2, "PodDisruptionBudget")) + \
            _field(2, _field(1, _field(1, "pdb")) + _field(2, spec))
        obj = proto.decode(body)
        self.assertEqual(obj["spec"], {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}})
        self.assertEqual(obj["metadata"], {"name": "pdb"})


class Report(unittest.TextTestResult):
    def addSuccess(self, test):
        print("PASS %s" % test.id().split(".", 1)[1])

    def addFailure(self, test, err):
        print("FAIL %s: %s" % (test.id().split(".", 1)[1], str(err[1]).replace("\n", " ")[:300]))

    addError = addFailure


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(resultclass=Report, stream=open(os.devnull, "w")).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
