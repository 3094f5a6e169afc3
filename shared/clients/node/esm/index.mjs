// The ES module entry of seatlease-client: the CommonJS build's exports (dist/), so that
// `import` and `require` share one copy of every class (`instanceof` holds whichever way
// a product's parts load the package).
export * from "../dist/index.js";
