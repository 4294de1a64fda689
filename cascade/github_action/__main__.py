from cascade.github_action.run import main

main()
