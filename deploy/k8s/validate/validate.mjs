// Validates Kubernetes manifests (what `lockstep render k8s` writes) against schemas:
// the core kinds with the kubernetes-models validators (the Kubernetes OpenAPI
// schemas), including the pod templates inside LeaderWorkerSets; LeaderWorkerSet and
// ComputeDomain against small schemas of the fields Lockstep writes (schemas.mjs).
//
//   node deploy/k8s/validate/validate.mjs DIR_OR_FILE...
//
// Prints one line per object; exit 1 when any object is invalid or of an unknown kind.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import { parseAllDocuments } from "yaml";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { PodTemplateSpec } from "kubernetes-models/v1/PodTemplateSpec";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { StatefulSet } from "kubernetes-models/apps/v1/StatefulSet";
import { computeDomainSchema, leaderWorkerSetSchema } from "./schemas.mjs";

const ajv = new Ajv({ allErrors: true, strict: true });
const validateLws = ajv.compile(leaderWorkerSetSchema);
const validateComputeDomain = ajv.compile(computeDomainSchema);

function checkCore(Model, object) {
  new Model(object).validate(); // throws with every problem
}

function checkWithSchema(validate, object) {
  if (!validate(object)) throw new Error(ajv.errorsText(validate.errors, { separator: "; " }));
}

const checkers = {
  "v1/ConfigMap": (o) => checkCore(ConfigMap, o),
  "v1/Secret": (o) => checkCore(Secret, o),
  "v1/Service": (o) => checkCore(Service, o),
  "apps/v1/Deployment": (o) => checkCore(Deployment, o),
  "apps/v1/StatefulSet": (o) => checkCore(StatefulSet, o),
  "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet": (o) => {
    checkWithSchema(validateLws, o);
    const templates = o.spec.leaderWorkerTemplate;
    checkCore(PodTemplateSpec, templates.workerTemplate);
    if (templates.leaderTemplate) checkCore(PodTemplateSpec, templates.leaderTemplate);
  },
  "resource.nvidia.com/v1beta1/ComputeDomain": (o) => checkWithSchema(validateComputeDomain, o),
};

function filesOf(path) {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .filter((name) => name.endsWith(".yaml"))
    .sort()
    .map((name) => join(path, name));
}

let failures = 0;
let objects = 0;
for (const path of process.argv.slice(2).flatMap(filesOf)) {
  for (const doc of parseAllDocuments(readFileSync(path, "utf8"))) {
    if (doc.errors.length > 0) {
      console.log(`INVALID ${path}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      failures++;
      continue;
    }
    const object = doc.toJS();
    const id = `${path}: ${object?.apiVersion}/${object?.kind} ${object?.metadata?.name}`;
    const check = checkers[`${object?.apiVersion}/${object?.kind}`];
    objects++;
    if (!check) {
      console.log(`INVALID ${id}: no schema for this kind`);
      failures++;
      continue;
    }
    try {
      check(object);
      console.log(`ok      ${id}`);
    } catch (error) {
      console.log(`INVALID ${id}: ${error.message}`);
      failures++;
    }
  }
}
if (objects === 0) {
  console.log("INVALID: no objects found");
  failures++;
}
console.log(`${objects} object(s), ${failures} invalid`);
process.exit(failures === 0 ? 0 : 1);
