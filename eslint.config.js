// Lint rules: typescript-eslint's recommended set with type information, plus the
// guardrails that keep the house in order (CONTRIBUTING.md, "Layers"):
// - promises: none left floating, none passed where a callback's result is ignored;
// - layers: core/ (domain model and rules) → events/ (the catalog) → functions/ (the pure
//   stages, which never reach infra/ or app/); infra/ (adapters) never reaches app/, cli/, lab/,
//   bench/ or harness/; nothing outside test/ imports test/;
// - no import cycles;
// - no source file over 400 lines outside test/ (a module has one job);
// - errors are typed: no string matching on error messages (core/errors.ts).
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import importX, { createNodeResolver } from "eslint-plugin-import-x";

/** Folders a layer must not import from, as no-restricted-imports patterns. */
const forbid = (folders, why) => ({
  "no-restricted-imports": [
    "error",
    { patterns: [{ group: folders.map((f) => `**/${f}/**`), message: why }] },
  ],
});
const OUTSIDE_PURE = ["infra", "app", "cli", "lab", "bench", "harness", "source", "test"];

export default tseslint.config(
  {
    ignores: ["node_modules/", ".cache/", "tools/", "dist/", "third_party/", "**/dist/", "examples/*/build/"],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { "import-x": importX },
    settings: {
      "import-x/resolver-next": [createNodeResolver({ extensions: [".ts", ".js"] })],
      "import-x/extensions": [".ts", ".js"],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false } }],
      "import-x/no-cycle": "error",
    },
  },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-restricted-syntax": [
        "error",
        {
          selector:
            "MemberExpression[object.name=/^(e|err|error)$/][property.name='message'] ~ CallExpression[callee.property.name=/^(includes|match|startsWith)$/]",
          message: "Do not match on error messages; use typed errors (core/errors.ts).",
        },
      ],
    },
  },
  {
    files: ["core/**/*.ts"],
    rules: forbid(
      [...OUTSIDE_PURE, "functions", "events"],
      "core/ is the bottom layer: the domain model and rules import nothing of fastfence's above them.",
    ),
  },
  {
    files: ["events/**/*.ts"],
    rules: forbid([...OUTSIDE_PURE, "functions"], "events/ is data on top of core/: no adapters, no stages."),
  },
  {
    files: ["functions/**/*.ts"],
    rules: forbid(
      OUTSIDE_PURE,
      "functions/ holds pure stages: what they need arrives in the view (core/decision.ts).",
    ),
  },
  {
    files: ["infra/**/*.ts", "source/**/*.ts"],
    rules: forbid(
      ["app", "cli", "lab", "bench", "harness", "test"],
      "adapters never reach the layers above them.",
    ),
  },
  {
    files: [
      "app/**/*.ts",
      "cli/**/*.ts",
      "lab/**/*.ts",
      "bench/**/*.ts",
      "harness/**/*.ts",
      "scripts/**/*.ts",
    ],
    rules: forbid(["test"], "product code never imports test code; shared test servers live in harness/."),
  },
  {
    // The examples' own tests run on node:test, whose describe/it return promises the runner awaits.
    files: ["examples/*/test/**/*.ts"],
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            { from: "package", package: "node:test", name: ["describe", "it", "test", "before", "after"] },
          ],
        },
      ],
    },
  },
  {
    ignores: ["test/**"],
    files: ["**/*.ts"],
    rules: { "max-lines": ["error", { max: 400 }] },
  },
);
