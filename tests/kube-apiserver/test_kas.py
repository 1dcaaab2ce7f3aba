#!/usr/bin/env python3
"""Unit tests of the fake API server's pure parts: selectors, patches, protobuf decoding,
field validation.

Run: python3 tests/kube-apiserver/test_kas.py   (prints "PASS name" / "FAIL name: why")
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
sys.dont_write_bytecode = True

from kas import crdvalidate, fields, patch, proto, selectors  # noqa: E402


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


    def test_inline_fields(self):
        # Volume.volumeSource and ConfigMapVolumeSource.localObjectReference are Go inline
        # structs: their fields belong to the parent object in JSON
        cm = _field(19, _field(1, _field(1, "cfg")) + _field(3, 420))
        pod = _field(1, _field(1, "p")) + _field(2, _field(1, _field(1, "v") + _field(2, cm)))
        obj = proto.decode(proto.MAGIC + _field(1, _field(1, "v1") + _field(2, "Pod")) + _field(2, pod))
        self.assertEqual(obj["spec"]["volumes"], [{"name": "v", "configMap": {"name": "cfg", "defaultMode": 420}}])


# The bodies and the expected texts of the real server's integration test
# (kubernetes test/integration/apiserver/field_validation_test.go).
INVALID_DEPLOYMENT = """{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "n", "name": "n2", "unknownMeta": "x", "labels": {"app": "nginx"}},
  "spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
    "paused": true, "paused": false, "selector": {"matchLabels": {"app": "nginx"}},
    "template": {"metadata": {"labels": {"app": "nginx"}},
      "spec": {"containers": [{"name": "nginx", "image": "nginx:latest", "unknownNested": "val1",
        "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"""
MERGE_PATCH = """{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2",
  "paused": true, "paused": false, "template": {"spec": {"containers": [{"name": "nginx",
  "image": "nginx:latest", "unknownNested": "val1", "imagePullPolicy": "Always",
  "imagePullPolicy": "Never"}]}}}}"""
DEPLOYMENT = fields.root_node("apps", "v1", "Deployment")


class FieldValidation(unittest.TestCase):
    def test_typed_body_document_order(self):
        obj = fields.loads(INVALID_DEPLOYMENT)
        out, errs = fields.check(DEPLOYMENT, obj)
        self.assertEqual(", ".join(errs),
                         'duplicate field "metadata.name", unknown field "metadata.unknownMeta", '
                         'unknown field "spec.unknown1", unknown field "spec.unknownDupe", duplicate '
                         'field "spec.paused", unknown field "spec.template.spec.containers[0].unknownNested", '
                         'duplicate field "spec.template.spec.containers[0].imagePullPolicy"')
        # what Warn and Ignore keep: no unknown field, the last of duplicates
        self.assertEqual(out["metadata"], {"name": "n2", "labels": {"app": "nginx"}})
        self.assertEqual(out["spec"]["paused"], False)
        self.assertNotIn("unknown1", out["spec"])
        self.assertEqual(out["spec"]["template"]["spec"]["containers"][0],
                         {"name": "nginx", "image": "nginx:latest", "imagePullPolicy": "Never"})

    def test_patch_order(self):
        body = fields.loads(MERGE_PATCH)
        doc = patch.merge_patch({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "n"},
                                 "spec": {"template": {"spec": {"containers": [{"name": "nginx"}]}}}}, body)
        _out, unknown = fields.check(DEPLOYMENT, doc, "sorted")
        self.assertEqual(fields.patch_duplicates(body, "application/merge-patch+json") + unknown, [
            'duplicate field "spec.unknownDupe"', 'duplicate field "spec.paused"',
            'duplicate field "spec.template.spec.containers[0].imagePullPolicy"',
            'unknown field "spec.template.spec.containers[0].unknownNested"',
            'unknown field "spec.unknown1"', 'unknown field "spec.unknownDupe"'])

    def test_json_patch_operations(self):
        ops = fields.loads('[{"op": "add", "path": "/spec/a", "value": "v", "foo": "bar"},'
                           ' {"op": "add", "path": "/spec/b", "path": "/spec/c", "value": 1}]')
        self.assertEqual(fields.patch_duplicates(ops, "application/json-patch+json"),
                         ['json patch unknown field "[0].foo"', 'json patch duplicate field "[1].path"'])

    def test_valid_objects_pass(self):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"},
                                                               "annotations": {"x": "y"}},
               "spec": {"nodeSelector": {"k": "v"}, "volumes": [
                   {"name": "c", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "p"}]}},
                   {"name": "s", "secret": {"secretName": "s"}},
                   {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
                   "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                                   "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                                   "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 3},
                                   "resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": 1}}}],
                   "ephemeralContainers": [{"name": "e", "image": "i", "targetContainerName": "c"}],
                   "tolerations": [{"key": "k", "operator": "Exists"}]},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                              "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}
        pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
              "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1", "volumeAttributes": {"a": "b"}},
                       "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                       "claimRef": {"kind": "PersistentVolumeClaim", "name": "c", "namespace": "d"}}}
        sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
               "spec": {"serviceName": "s", "volumeClaimTemplates": [
                   {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "d"},
                    "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]}}
        tr = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"audiences": ["a"], "boundObjectRef": {"kind": "Pod", "name": "p", "uid": "u"}}}
        for obj, node in ((pod, fields.root_node("", "v1", "Pod")),
                          (pv, fields.root_node("", "v1", "PersistentVolume")),
                          (sts, fields.root_node("apps", "v1", "StatefulSet")),
                          (tr, fields.root_node("authentication.k8s.io", "v1", "TokenRequest"))):
            out, errs = fields.check(node, obj)
            self.assertEqual((errs, out), ([], obj))

    def test_type_meta_only_where_go_has_it(self):
        node = fields.root_node("apps", "v1", "Deployment")
        _out, errs = fields.check(node, {"apiVersion": "apps/v1", "kind": "Deployment",
                                         "spec": {"template": {"kind": "PodTemplateSpec"}}})
        self.assertEqual(errs, ['unknown field "spec.template.kind"'])

    def test_custom_resource_pruning(self):
        schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                      "items": {"type": "object", "properties": {"containerPort": {"type": "integer"},
                                                                 "protocol": {"type": "string"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True}}}}}
        node = fields.root_node("example.com", "v1", "Gadget", schema, crd=True)
        obj = fields.loads('{"apiVersion": "example.com/v1", "kind": "Gadget", "zzz": 1,'
                           ' "metadata": {"name": "g", "name": "g", "bogus": 1}, "spec": {"size": 1,'
                           ' "colour": "red", "ports": [{"containerPort": 80, "protocol": "TCP", "x": 1}],'
                           ' "labels": {"a": "b"}, "free": {"any": {"thing": 1}},'
                           ' "embedded": {"apiVersion": "v1", "kind": "K", "metadata": {"nope": 1}, "w": 1}}}')
        out, errs = fields.check(node, obj)
        self.assertEqual(errs, ['duplicate field "metadata.name"', 'unknown field "metadata.bogus"',
                                'unknown field "spec.colour"', 'unknown field "spec.ports[0].x"',
                                'unknown field "zzz"', 'unknown field "spec.embedded.metadata.nope"'])
        self.assertEqual(out["spec"], {"size": 1, "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                       "labels": {"a": "b"}, "free": {"any": {"thing": 1}},
                                       "embedded": {"apiVersion": "v1", "kind": "K", "metadata": {}, "w": 1}})
        _out, errs = fields.check(node, obj, "sorted", smd=True)
        self.assertIn('.spec.ports[containerPort=80,protocol="TCP"].x', errs)

    def test_server_side_apply_paths(self):
        _out, errs = fields.check(DEPLOYMENT, {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "bar": 1, "ports": [{"containerPort": 80, "protocol": "TCP", "x": 1}]}],
            "tolerations": [{"key": "k", "y": 1}]}}, "foo": 1}}, "sorted", smd=True)
        self.assertEqual(errs, ['.spec.foo', '.spec.template.spec.containers[name="app"].bar',
                                '.spec.template.spec.containers[name="app"].ports[containerPort=80,protocol="TCP"].x',
                                '.spec.template.spec.tolerations[0].y'])

    def test_crd_schema(self):
        node = fields.root_node("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "a.b"}, "spec": {"group": "b", "names": {"plural": "a", "kind": "A"},
                                                     "scope": "Namespaced", "versions": [{
                                                         "name": "v1", "served": True, "storage": True,
                                                         "subresources": {"status": {}},
                                                         "schema": {"openAPIV3Schema": {
                                                             "type": "object", "properties": {"spec": {
                                                                 "type": "object", "bogus": 1,
                                                                 "items": {"whatever": 1},
                                                                 "x-kubernetes-validations": [{"rule": "true"}]}}}}}]}}
        _out, errs = fields.check(node, crd)
        self.assertEqual(errs, ['unknown field "spec.versions[0].schema.openAPIV3Schema.properties.spec.bogus"'])

    def test_custom_resource_values(self):
        schema = {"type": "object", "properties": {"spec": {
            "type": "object", "required": ["kind", "size"], "properties": {
                "kind": {"type": "string", "enum": ["a", "b"]},
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "disk": {"type": "string", "default": "gp2"},
                "name": {"type": "string", "minLength": 2, "pattern": "^x"},
                "q": {"x-kubernetes-int-or-string": True},
                "list": {"type": "array", "items": {"type": "string"}},
                "tags": {"type": "object", "additionalProperties": {"type": "string"}}}}}}
        ok = {"spec": {"kind": "a", "size": 3, "q": "10Mi", "list": ["y"], "tags": {"t": "v"}}}
        self.assertEqual(crdvalidate.check(schema, ok), [])
        self.assertEqual(ok["spec"]["disk"], "gp2")  # the default is filled in
        bad = {"spec": {"kind": "c", "size": 0, "name": "y", "q": [1], "list": [3], "tags": {"t": 1}}}
        self.assertEqual(crdvalidate.check(schema, bad), [
            'spec.kind: Unsupported value: "c": supported values: "a", "b"',
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            'spec.name: Invalid value: "y": spec.name in body should be at least 2 chars long',
            "spec.name: Invalid value: \"y\": spec.name in body should match '^x'",
            'spec.q: Invalid value: "array": spec.q in body must be of type integer,string: "array"',
            'spec.list[0]: Invalid value: "integer": spec.list[0] in body must be of type string: "integer"',
            'spec.tags.t: Invalid value: "integer": spec.tags.t in body must be of type string: "integer"'])
        self.assertEqual(crdvalidate.check(schema, {"spec": {"size": "3"}}), [
            "spec.kind: Required value",
            'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"'])
        self.assertEqual(crdvalidate.check(schema, {"spec": {"kind": "b", "size": 11}}),
                         ["spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"])

    def test_duplicate_lines(self):
        text = '{"apiVersion": "v1",\n "data": {"a": "1",\n  "a": "2"},\n "kind": "x", "kind": "y"}'
        self.assertEqual(fields.yaml_duplicate_lines(text), ['line 3: key "a" already set in map',
                                                             'line 4: key "kind" already set in map'])
        try:
            import yaml  # noqa: F401
        except ImportError:
            return
        self.assertEqual(fields.yaml_duplicate_lines("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n"),
                         ['line 4: key "c" already set in map', 'line 5: key "a" already set in map'])

    def test_go_formatting(self):
        self.assertEqual(fields.go_value({"spec": {"b": [1, 2.5, True, None], "a": "x y"}}),
                         "map[spec:map[a:x y b:[1 2.5 true <nil>]]]")
        self.assertEqual([fields.go_float(f) for f in (1.0, 1e6, 123456789.0, 1e-5, 100000.0, 0.5)],
                         ["1", "1e+06", "1.23456789e+08", "1e-05", "100000", "0.5"])
        self.assertEqual(fields.go_quote('a"b\\c\n\x01é'), '"a\\"b\\\\c\\n\\x01é"')
        self.assertEqual(fields.go_json({"b": "<&>", "a": 1}), '{"a":1,"b":"\\u003c\\u0026\\u003e"}')
        self.assertEqual(fields.warning_header('unknown field "x"'), '299 - "unknown field \\"x\\""')


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
