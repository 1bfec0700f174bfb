"""User studies of how people read ratings: export a kit of stimuli and questionnaires, analyze the answers."""
