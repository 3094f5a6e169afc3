// The types of the ES module entry: those of the CommonJS build it re-exports.
export * from "../dist/index.js";
