"""scikit-learn compatible DP models: logistic and linear regression, naive Bayes, scaling."""

__all__: list[str] = []
