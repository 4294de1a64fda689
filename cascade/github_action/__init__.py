"""The GitHub Action's entry script (`python -I -m cascade.github_action`, run by action.yml).

It reads the pull-request event, builds the task text (PR title and body, plus the issues it closes), runs
`cascade review --git BASE...HEAD` as a subprocess, and then reports the verdict the ways GitHub offers: one
persistent PR comment (found again by a hidden marker and edited on re-runs), the job summary, step outputs, check
annotations and, on request, a SARIF file for `github/codeql-action/upload-sarif`.

Modules, each importing only those listed before it:
- `event`: the pull_request payload and the action's inputs (INPUT_* and the runner's GITHUB_* variables);
- `api`: the GitHub REST client (issues and issue comments);
- `review`: the task text and the `cascade review` subprocess, with the config read from the base commit;
- `publish`: the PR comment, job summary, step outputs, annotations and extra report files;
- `run`: the sequence of the above and the exit status.

Exit status: per the `fail-on` input for a verdict; 3 (bad input) or 4 (internal error) with one line when the gate
could not run — whatever `fail-on` says, because a gate that could not run must not pass silently.

Secrets: the GitHub token goes to the GitHub API only (never to `cascade review`, never printed); the LLM key
(CASCADE_LLM_API_KEY, or the variable the config names in `llm.api_key_env`) stays in the environment for the LLM
client only, and the sandbox scrubs it (with every *TOKEN*/*KEY* name) before PR code runs.
"""
