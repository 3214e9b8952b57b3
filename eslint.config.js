// Lint rules: typescript-eslint's recommended set, plus a ban on string-matching error
// messages (errors are typed; see core/errors.ts).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", ".cache/", "tools/", "dist/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
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
);
