"""The desktop's browser as the host reaches it: Chrome's DevTools endpoint, active
tab and profile files (`cdp`), Google Drive (`drive`) and OSWorld's URL
equivalence (`urls`).

Both the Chrome setup steps (`cua_rl.desktop.setup_steps.chrome`) and the Chrome
getters and metrics (`cua_rl.evaluation`) use these helpers; they live here, below
both (docs/architecture.md, "Layers"), and reach the desktop through the small
`cdp.ChromeGuest` protocol, not through desktop/. Importing this package
imports nothing; Playwright, PyDrive and tldextract are imported on use.
"""
