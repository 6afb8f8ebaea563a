// JSON schemas for the custom resources `lockstep render k8s` writes, covering the
// fields it uses (closed objects: an unknown field is an error, as a typo would be
// for the API server). From the LeaderWorkerSet v1 API (sigs.k8s.io/lws) and the
// NVIDIA DRA driver's ComputeDomain v1beta1. Pod templates are checked separately
// against the Kubernetes schema (validate.mjs).

const name = { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 63 };
const stringMap = { type: "object", additionalProperties: { type: "string" } };
const metadata = {
  type: "object",
  required: ["name"],
  additionalProperties: false,
  properties: { name, namespace: name, labels: stringMap, annotations: stringMap },
};
const podTemplate = {
  type: "object",
  required: ["spec"],
  properties: { metadata: { type: "object" }, spec: { type: "object" } },
};

export const leaderWorkerSetSchema = {
  type: "object",
  required: ["apiVersion", "kind", "metadata", "spec"],
  additionalProperties: false,
  properties: {
    apiVersion: { const: "leaderworkerset.x-k8s.io/v1" },
    kind: { const: "LeaderWorkerSet" },
    metadata,
    spec: {
      type: "object",
      required: ["leaderWorkerTemplate"],
      additionalProperties: false,
      properties: {
        replicas: { type: "integer", minimum: 0 },
        startupPolicy: { enum: ["LeaderCreated", "LeaderReady"] },
        leaderWorkerTemplate: {
          type: "object",
          required: ["workerTemplate"],
          additionalProperties: false,
          properties: {
            size: { type: "integer", minimum: 1 },
            restartPolicy: { enum: ["RecreateGroupOnPodRestart", "None"] },
            leaderTemplate: podTemplate,
            workerTemplate: podTemplate,
          },
        },
      },
    },
  },
};

export const computeDomainSchema = {
  type: "object",
  required: ["apiVersion", "kind", "metadata", "spec"],
  additionalProperties: false,
  properties: {
    apiVersion: { const: "resource.nvidia.com/v1beta1" },
    kind: { const: "ComputeDomain" },
    metadata,
    spec: {
      type: "object",
      required: ["numNodes", "channel"],
      additionalProperties: false,
      properties: {
        numNodes: { type: "integer", minimum: 0 },
        channel: {
          type: "object",
          required: ["resourceClaimTemplate"],
          additionalProperties: false,
          properties: {
            resourceClaimTemplate: {
              type: "object",
              required: ["name"],
              additionalProperties: false,
              properties: { name },
            },
            allocationMode: { enum: ["Single", "All"] },
          },
        },
      },
    },
  },
};
